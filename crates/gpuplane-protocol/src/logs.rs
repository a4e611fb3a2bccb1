//! A job's full output, as its node's agent ships it: every line its process printed, numbered per part (`seq`,
//! from 1, with no gaps except the lines the agent had to drop), with the rank that printed it where the launcher
//! says (torchrun's `[rankN]:` prefix, which gpuplane's templates ask for). Shared by the service's ingest
//! (`POST /v1/agent/assignments/{job_node_id}/logs`) and the agent's shipper.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Longest line kept, in bytes of UTF-8: a longer one is cut at a character boundary and ends with
/// [`CUT_MARK`].
pub const LOG_LINE_BYTES: usize = 4096;
/// What a cut line ends with.
pub const CUT_MARK: &str = " [cut]";
/// Most lines one report carries.
pub const MAX_LOG_LINES_PER_REPORT: usize = 2000;

/// Which of the process's streams a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    Stdout,
    Stderr,
}

impl LogStream {
    /// The one-letter code the service stores.
    pub fn code(self) -> &'static str {
        match self {
            LogStream::Stdout => "o",
            LogStream::Stderr => "e",
        }
    }

    pub fn from_code(code: &str) -> Option<Self> {
        match code {
            "o" => Some(LogStream::Stdout),
            "e" => Some(LogStream::Stderr),
            _ => None,
        }
    }
}

/// One line a part's process printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LogLine {
    /// The line's number in its part's output, from 1.
    #[cfg_attr(feature = "server", schema(minimum = 1))]
    pub seq: i64,
    /// When the agent read it.
    pub at: DateTime<Utc>,
    pub stream: LogStream,
    /// The global rank that printed it (from torchrun's `[rankN]:` prefix, which is taken off the text); absent
    /// for a launcher's own output or a process that is not torchrun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 1048575))]
    pub rank: Option<i32>,
    /// The line without its end of line, at most [`LOG_LINE_BYTES`] bytes.
    pub text: String,
}

/// A batch of a part's output. Sending the same lines again is harmless: the service keeps each `seq` once. A gap
/// in `seq` is lines the agent dropped (its buffer is bounded: the oldest go when the service stays away too
/// long); the service counts them as lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LogReport {
    /// Oldest first, `seq` increasing.
    #[cfg_attr(feature = "server", schema(max_items = 2000))]
    pub lines: Vec<LogLine>,
    /// The process has ended and this report holds the last of its output.
    #[serde(default)]
    pub last: bool,
}

/// What the service holds of the part's output now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LogReportResponse {
    /// The highest `seq` the service has of this part: the agent may forget every line up to it.
    pub acked_seq: i64,
}

impl LogReport {
    /// The first bad field, as (field, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.lines.len() > MAX_LOG_LINES_PER_REPORT {
            return Err(("lines".into(), format!("at most {MAX_LOG_LINES_PER_REPORT} lines per report")));
        }
        let mut previous = 0;
        for (i, line) in self.lines.iter().enumerate() {
            if line.seq <= previous {
                return Err((format!("lines[{i}].seq"), "from 1, increasing".into()));
            }
            previous = line.seq;
            if line.text.len() > LOG_LINE_BYTES {
                return Err((format!("lines[{i}].text"), format!("at most {LOG_LINE_BYTES} bytes")));
            }
            if line.text.contains(['\n', '\r']) || line.text.chars().any(crate::text::is_forbidden_char) {
                return Err((format!("lines[{i}].text"), "one line, without control characters".into()));
            }
            if line.rank.is_some_and(|r| !(0..=1_048_575).contains(&r)) {
                return Err((format!("lines[{i}].rank"), "0 to 1048575".into()));
            }
        }
        Ok(())
    }
}

/// A line as read from a process, made fit to ship: forbidden characters replaced, cut to [`LOG_LINE_BYTES`],
/// and torchrun's `[rankN]:` prefix taken off into the rank.
pub fn clean_line(raw: &str) -> (Option<i32>, String) {
    let text = crate::text::replace_forbidden(raw.trim_end_matches(['\n', '\r']));
    let text = text.replace('\r', "\u{FFFD}");
    let (rank, text) = match rank_prefix(&text) {
        Some((rank, rest)) => (Some(rank), rest.to_owned()),
        None => (None, text),
    };
    (rank, cut(text))
}

/// A line without torchrun's `[rankN]:` prefix, if it has one.
pub fn without_rank_prefix(text: &str) -> &str {
    rank_prefix(text).map_or(text, |(_, rest)| rest)
}

/// `[rank12]:rest` as (12, rest).
fn rank_prefix(text: &str) -> Option<(i32, &str)> {
    let rest = text.strip_prefix("[rank")?;
    let (digits, rest) = rest.split_once("]:")?;
    if digits.is_empty() || digits.len() > 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rank: i32 = digits.parse().ok()?;
    (rank <= 1_048_575).then_some((rank, rest))
}

fn cut(text: String) -> String {
    if text.len() <= LOG_LINE_BYTES {
        return text;
    }
    let mut end = LOG_LINE_BYTES - CUT_MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT_MARK}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_prefix_becomes_the_rank() {
        assert_eq!(clean_line("[rank3]:step 1 loss 2.0\n"), (Some(3), "step 1 loss 2.0".to_string()));
        assert_eq!(clean_line("[rank0]: Traceback"), (Some(0), " Traceback".to_string()));
        for plain in
            ["[rank]:x", "[rankx]:x", "[rank3] x", "[default0]:x", "W1205 torchrun warning", "[rank99999999]:x"]
        {
            assert_eq!(clean_line(plain), (None, plain.to_string()), "{plain}");
        }
    }

    #[test]
    fn lines_are_cut_at_a_character_and_cleaned() {
        let (_, text) = clean_line(&"é".repeat(5000));
        assert!(text.len() <= LOG_LINE_BYTES && text.ends_with(CUT_MARK), "{}", text.len());
        assert_eq!(clean_line("a\0b\rc\r\n").1, "a\u{FFFD}b\u{FFFD}c");
        let report = LogReport {
            lines: vec![LogLine { seq: 1, at: DateTime::UNIX_EPOCH, stream: LogStream::Stdout, rank: None, text }],
            last: false,
        };
        assert_eq!(report.check(), Ok(()));
    }

    #[test]
    fn reports_are_checked() {
        let line = |seq, text: &str| LogLine {
            seq,
            at: DateTime::UNIX_EPOCH,
            stream: LogStream::Stderr,
            rank: None,
            text: text.into(),
        };
        let report = |lines| LogReport { lines, last: false };
        assert_eq!(report(vec![line(2, "a"), line(2, "b")]).check().unwrap_err().0, "lines[1].seq");
        assert_eq!(report(vec![line(0, "a")]).check().unwrap_err().0, "lines[0].seq");
        assert_eq!(report(vec![line(1, "a\nb")]).check().unwrap_err().0, "lines[0].text");
        assert_eq!(report(vec![line(1, &"x".repeat(LOG_LINE_BYTES + 1))]).check().unwrap_err().0, "lines[0].text");
    }
}
