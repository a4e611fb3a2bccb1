"""The end state of docs/walkthrough.md, checked after scripts/walkthrough.sh has run its commands.

Reads what the document's shell left (API, OP, TOKEN, POOL, LEASE, JOB) from the environment and checks, through
the API only: the job succeeded on the lease's node and saw its 8 GPUs; the lease is released and its GPUs are free
again; the month's draft invoice holds the lease at exactly the price of its GPU-seconds by docs/billing.md's
rounding rule, as do the ledger and the balance; and the draft cannot be issued while the month is open.
Prints `ok ...` per check; exits 1 at the first that fails.
"""

import datetime as dt
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

API, OP, TOKEN = os.environ["API"], os.environ["OP"], os.environ["TOKEN"]
POOL, LEASE, JOB = os.environ["POOL"], os.environ["LEASE"], os.environ["JOB"]

# What the document sets up: 8 GPUs at 249 minor units (USD cents) per GPU-hour, a 5,000.00 USD top-up.
GPUS, PRICE_PER_GPU_HOUR_MINOR, TOP_UP_MINOR, CURRENCY = 8, 249, 500_000, "USD"
# docs/billing.md: cost is exact in units of 1/2,592,000 of a minor unit; an hourly price P costs 720 P units per
# GPU-second; a lease is charged floor(its exact cost).
UNITS_PER_MINOR = 2_592_000


def call(method: str, path: str, token: str) -> tuple[int, Any]:
    request = urllib.request.Request(API + path, method=method, headers={"authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def get(path: str, token: str = TOKEN) -> Any:
    status, body = call("GET", path, token)
    check(f"GET {path} is 200", status == 200, f"{status}: {body}", quiet=True)
    return body


def check(what: str, ok: bool, detail: object, quiet: bool = False) -> None:
    """`ok what`, or `FAILED what: detail` and exit 1."""
    if not ok:
        print(f"FAILED {what}: {detail}", file=sys.stderr)
        sys.exit(1)
    if not quiet:
        print(f"ok {what}")


def when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


# The job: finished on the lease's one node, exit 0, and it saw exactly the lease's GPUs.
job = get(f"/v1/jobs/{JOB}")
nodes = job["nodes"]
check("the job succeeded", job["state"] == "succeeded", f"{job['state']}: {job.get('reason')}")
check(
    "it ran on one node, exit code 0",
    len(nodes) == 1 and nodes[0]["state"] == "succeeded" and nodes[0]["exit_code"] == 0,
    [(n["hostname"], n["state"], n["exit_code"]) for n in nodes],
)
tail = nodes[0]["output_tail"]
check(
    "its output shows the 8 leased GPUs and a world of 8",
    tail[:2] == [",".join(str(i) for i in range(GPUS)), str(GPUS)],
    tail,
)

# The lease: released, its GPUs free again.
lease = get(f"/v1/leases/{LEASE}")
check("the lease is released", lease["state"] == "released" and lease["ended_at"] is not None, lease["state"])
pool = get(f"/v1/pools/{POOL}")
check("the pool has its 8 GPUs free again", pool["free_gpus"] == GPUS, pool["free_gpus"])

# The price of its whole seconds, by the rounding rule.
start, end = when(lease["starts_at"]), when(lease["ended_at"])
check(
    "the lease began and ended in one month (UTC)",
    (start.year, start.month) == (end.year, end.month),
    f"{start} to {end}: rerun away from a month's end",
)
gpu_seconds = GPUS * ((end - start) // dt.timedelta(seconds=1))
amount = 720 * PRICE_PER_GPU_HOUR_MINOR * gpu_seconds // UNITS_PER_MINOR
check(f"the lease ran {gpu_seconds} GPU-seconds, {amount} minor units", gpu_seconds > 0 and amount > 0, (start, end))

# The month's draft invoice, as the tenant sees it.
month = f"{end.year:04d}-{end.month:02d}"
invoices = [i for i in get("/v1/billing/invoices") if i["month"] == month]
check(f"the tenant has one invoice for {month}", len(invoices) == 1, invoices)
invoice = invoices[0]
check(
    "it is a draft of an open month, in USD",
    (invoice["state"], invoice["month_closed"], invoice["currency"]) == ("draft", False, CURRENCY),
    (invoice["state"], invoice["month_closed"], invoice["currency"]),
)
lines = invoice["lines"]
check("it has one line, the lease's", [line["lease_id"] for line in lines] == [LEASE], lines)
line = lines[0]
check(
    "the line holds the lease's GPU-seconds at the pool's hourly price",
    (line["gpu_seconds"], line["unit_price_minor"], line["term"]) == (gpu_seconds, PRICE_PER_GPU_HOUR_MINOR, "hourly"),
    line,
)
check(
    "the line's amount is floor(249 x GPU-seconds / 3600)",
    line["amount_minor"] == amount,
    f"{line['amount_minor']} for {gpu_seconds} GPU-seconds, expected {amount}",
)
check(
    "the invoice's usage and total are that amount, without credits",
    (invoice["usage_minor"], invoice["credits_minor"], invoice["total_minor"]) == (amount, 0, amount),
    (invoice["usage_minor"], invoice["credits_minor"], invoice["total_minor"]),
)

# The ledger and the balance agree with the invoice.
entries = get("/v1/billing/ledger?limit=500")["items"]
charged = -sum(e["amount_minor"] for e in entries if e["kind"] == "usage" and e["lease_id"] == LEASE)
check("the ledger's usage charges for the lease add up to the amount", charged == amount, f"{charged} vs {amount}")
balances = {b["currency"]: b["balance_minor"] for b in get("/v1/billing/balance")}
check(
    "the balance is the top-up less the amount",
    balances.get(CURRENCY) == TOP_UP_MINOR - amount,
    f"{balances} vs {TOP_UP_MINOR} - {amount}",
)

# An open month's draft cannot be issued.
status, problem = call("POST", f"/v1/admin/invoices/{invoice['id']}/issue", OP)
check(
    "issuing the draft is 409 month_open while the month lasts",
    status == 409 and isinstance(problem, dict) and problem.get("code") == "month_open",
    f"{status}: {problem}",
)
print(f"walkthrough: {gpu_seconds} GPU-seconds, {amount} minor units on the {month} draft")
