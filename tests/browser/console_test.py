#!/usr/bin/env python3
"""The web console in a real browser: Debian's Chromium, headless, driven by Selenium through chromium-driver.

Run by scripts/browser-test.sh, which builds the binary, starts the server on a fresh database and bootstraps an
operator key. This script seeds a tenant (admin and member keys, a balance), a pool and one real agent on
simulated GPUs over plain HTTP (the public API, standard library only), then drives the console as a person would:

  tenant admin: sign in, see the pools, get advice, lease the advised pool in one click, see the lease with its
                utilization chart, release it, see the charge on the lease and in billing;
  the session:  the cookie is HttpOnly and SameSite=Strict; a state change without X-CSRF-Token is 403 csrf_failed;
  member:       sees pools and leases, but no create-lease form, no release button and no API keys section;
  operator:     sees the fleet at a glance and cordons a node; opens the node's per-GPU heatmap and puts it into
                maintenance and back; sets a tenant's quota; adds a price; generates, issues and pays an invoice.

Screenshots of the main pages go to --screenshots. Prints one line per check; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

GPU = "a100-80g"
GPUS = 4
PRICE_PER_GPU_HOUR_MINOR = 3600  # one minor unit per GPU-second: a short lease still costs something visible


class Failed(Exception):
    pass


def check(name: str, ok: bool, detail: str = "") -> None:
    print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        raise Failed(name)


def wait_for(what: str, secs: float, probe, every: float = 0.25):
    deadline = time.monotonic() + secs
    while True:
        try:
            value = probe()
        except StaleElementReferenceException:  # the page re-rendered under the probe: look again
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            check(f"{what} (within {secs:.0f} s)", False, "timed out")
        time.sleep(every)


class Api:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, token: str | None = None, body=None, headers=None):
        req = urllib.request.Request(self.url + path, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, data) as res:
                raw = res.read()
                return res.status, dict(res.headers), json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, dict(e.headers), json.loads(raw) if raw else None

    def ok(self, method: str, path: str, token: str | None = None, body=None):
        status, _, data = self.call(method, path, token, body)
        if status >= 300:
            raise Failed(f"{method} {path}: {status} {data}")
        return data

    def token(self, key: str) -> str:
        return self.ok("POST", "/v1/auth/token", body={"api_key": key})["access_token"]


def previous_month() -> str:
    """`YYYY-MM` of the month before this one (UTC)."""
    now = time.gmtime()
    year, month = (now.tm_year, now.tm_mon - 1) if now.tm_mon > 1 else (now.tm_year - 1, 12)
    return f"{year:04d}-{month:02d}"


def seed(api: Api, operator_key: str, binary: str, work: Path) -> dict:
    op = api.token(operator_key)
    tenant = api.ok("POST", "/v1/admin/tenants", op, {"name": "browser-ml"})
    admin = api.ok("POST", f"/v1/admin/tenants/{tenant['id']}/api-keys", op, {"name": "admin", "role": "tenant_admin"})
    member = api.ok(
        "POST", f"/v1/admin/tenants/{tenant['id']}/api-keys", op, {"name": "member", "role": "tenant_member"}
    )
    api.ok("POST", f"/v1/admin/tenants/{tenant['id']}/ledger", op,
           {"kind": "topup", "amount_minor": 1_000_000, "currency": "USD", "reason": "browser test"})  # fmt: skip
    pool = api.ok("POST", "/v1/admin/pools", op, {"name": "a100-browser", "gpu_model": GPU, "region": "test",
                                                   "price_per_gpu_hour_minor": PRICE_PER_GPU_HOUR_MINOR, "currency": "USD"})  # fmt: skip
    join = api.ok("POST", f"/v1/admin/pools/{pool['id']}/join-tokens", op, {"max_uses": 1})
    env = dict(os.environ, RUST_LOG="warn")
    with open(work / "agent.out", "wb") as out, open(work / "agent.log", "wb") as err:
        agent = subprocess.Popen(
            [binary, "agent", "--server", api.url, "--join-token", join["join_token"], "--simulate", f"{GPU}:{GPUS}",
             "--hostname", "browser-1", "--state-dir", str(work / "agent-state")],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    (work / "agents.pids").write_text(f"{agent.pid}\n")

    def ready():
        if agent.poll() is not None:
            check("the agent runs", False, f"exited {agent.returncode}; see {work / 'agent.log'}")
        nodes = api.ok("GET", f"/v1/admin/nodes?pool_id={pool['id']}", op)["items"]
        return nodes if nodes and nodes[0]["state"] == "ready" else None

    nodes = wait_for("the agent's node is ready", 30, ready)
    check("seeded a tenant, a pool and a ready node with 4 simulated GPUs", len(nodes[0]["gpus"]) == GPUS)
    return {"operator_key": operator_key, "admin_key": admin["api_key"], "member_key": member["api_key"],
            "pool": pool, "node": nodes[0], "tenant": tenant}  # fmt: skip


class Console:
    def __init__(self, url: str, shots: Path) -> None:
        opts = webdriver.ChromeOptions()
        opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
                    "--no-first-run", "--disable-extensions"]:  # fmt: skip
            opts.add_argument(arg)
        service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
        self.d = webdriver.Chrome(options=opts, service=service)
        self.url = url.rstrip("/")
        self.shots = shots

    def wait(self, cond, secs: float = 15):
        # The page re-renders a view after each action: an element found a moment ago may be gone; look again.
        return WebDriverWait(
            self.d, secs, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
        ).until(cond)

    def css(self, sel: str, secs: float = 15):
        return self.wait(EC.visibility_of_element_located((By.CSS_SELECTOR, sel)), secs)

    def text(self) -> str:
        return self.d.find_element(By.TAG_NAME, "main").text

    def wait_text(self, what: str, secs: float = 15) -> None:
        self.wait(lambda d: what in d.find_element(By.TAG_NAME, "main").text, secs)

    def go(self, hash_: str) -> None:
        self.d.execute_script("location.hash = arguments[0]", hash_)

    def view(self, hash_: str, heading: str) -> None:
        """Navigate and wait until that view is shown (its heading), not the previous one."""
        self.go(hash_)
        self.wait(lambda d: d.find_element(By.CSS_SELECTOR, "main h1").text.startswith(heading))

    def sign_in(self, key: str) -> None:
        self.d.delete_all_cookies()
        self.d.get(self.url + "/#/signin")
        box = self.css("#api-key")
        box.send_keys(key)
        self.d.find_element(By.CSS_SELECTOR, "#signin-form button[type=submit]").click()
        self.css("#signout")

    def shot(self, name: str) -> None:
        if self.shots:
            self.shots.mkdir(parents=True, exist_ok=True)
            self.d.save_screenshot(str(self.shots / f"{name}.png"))

    def fetch(self, method: str, path: str, headers: dict) -> dict:
        """A request from the page itself (same origin, the session cookie attached)."""
        return self.d.execute_async_script(
            """const [method, path, headers, done] = arguments;
               fetch(path, {method, headers, credentials: 'same-origin'})
                 .then(async r => done({status: r.status, body: await r.text()}))
                 .catch(e => done({status: 0, body: String(e)}));""",
            method, path, headers)  # fmt: skip

    def quit(self) -> None:
        self.d.quit()


def tenant_admin(c: Console, seeded: dict) -> None:
    pool = seeded["pool"]
    c.sign_in(seeded["admin_key"])
    c.wait_text("a100-browser")
    check("tenant admin signs in and sees the pools", "4 / 4" in c.text(), "a100-browser: 4 / 4 free")

    cookies = {k["name"]: k for k in c.d.get_cookies()}
    session = cookies.get("gp_session", {})
    check("the session cookie is HttpOnly and SameSite=Strict",
          session.get("httpOnly") is True and session.get("sameSite") == "Strict" and session.get("path") == "/",
          str({k: session.get(k) for k in ("httpOnly", "sameSite", "path", "secure")}))  # fmt: skip
    check("scripts cannot read the session cookie", "gp_session" not in c.d.execute_script("return document.cookie"))
    refused = c.fetch("POST", "/v1/tenant/api-keys", {"Content-Type": "application/json"})
    body = json.loads(refused["body"] or "{}")
    check("a state change without X-CSRF-Token is refused", refused["status"] == 403 and body.get("code") == "csrf_failed",
          f"{refused['status']} {body.get('code')}")  # fmt: skip

    c.view("#/advice", "What should I rent")
    c.d.find_element(By.CSS_SELECTOR, "#advice-form button[type=submit]").click()
    c.css("#advice-results table", 30)
    c.shot("advice")
    check("advice ranks the pool for a 7B LoRA fine-tune", "a100-browser" in c.text())
    c.css("button[data-plan='0']").click()
    parts = [r.get_attribute("data-part") for r in c.css("#plan-memory").find_elements(By.CSS_SELECTOR, "rect[data-part]")]
    steps = [r.get_attribute("data-part") for r in c.css("#plan-step").find_elements(By.CSS_SELECTOR, "rect[data-part]")]
    check("the plan viewer charts the memory per GPU", {"weights", "activations"} <= set(parts) and
          "usable" in c.css("#plan-view").text, str(parts))  # fmt: skip
    check("the plan viewer charts the step-time split", "compute" in steps, str(steps))
    c.d.execute_script("document.getElementById('plan-view').scrollIntoView()")
    c.shot("plan")
    c.d.execute_script("window.scrollTo(0, 0)")
    c.d.find_element(By.CSS_SELECTOR, f"button[data-pool='{pool['id']}']").click()
    c.css("#lease-form")
    check(
        "one click on an option fills the lease form with its pool",
        Select(c.d.find_element(By.ID, "lease-pool")).first_selected_option.get_attribute("value") == pool["id"],
    )
    gpus = c.d.find_element(By.ID, "lease-gpus")
    gpus.clear()
    gpus.send_keys("64")
    c.d.find_element(By.ID, "create-lease").click()
    c.wait(lambda d: d.find_element(By.ID, "flash").text)
    flash = c.d.find_element(By.ID, "flash").text
    check("a refused lease is explained in words", "gpu_count" in flash or "GPUs" in flash, flash)
    gpus = c.d.find_element(By.ID, "lease-gpus")
    gpus.clear()
    gpus.send_keys(str(GPUS))
    c.d.find_element(By.ID, "create-lease").click()
    c.wait(lambda d: "#/lease/" in d.current_url)
    lease_id = c.d.current_url.rsplit("/", 1)[1]
    c.wait_text("active")
    check("the lease is created and shown active", "browser-1" in c.text(), lease_id)

    # The chart fills as the agent's heartbeats bring samples: reload the page until every GPU has a line.
    def chart_has_lines():
        c.d.refresh()
        chart = c.css("svg.chart[aria-label='GPU utilization chart']")
        lines = [int(p.get_attribute("data-points")) for p in chart.find_elements(By.TAG_NAME, "path")]
        return lines if len(lines) == GPUS and min(lines) >= 5 else None

    lines = wait_for("the utilization chart draws the GPUs' samples", 60, chart_has_lines, 1.0)
    check("the lease page charts utilization per GPU", True, f"{len(lines)} GPUs, {min(lines)}+ points each")
    c.shot("lease")

    c.view("#/leases", "Leases")
    c.wait_text(lease_id[:8])
    c.shot("leases")
    # On a phone: the table turns into labelled rows, nothing overflows sideways.
    c.d.set_window_size(390, 844)
    overflow = c.d.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    c.shot("leases-phone")
    c.d.set_window_size(1280, 900)
    check("the leases page fits a phone's width", overflow <= 0, f"{overflow} px too wide")
    check("the leases list shows the lease with its GPUs and node", "browser-1" in c.text())

    c.view(f"#/lease/{lease_id}", "Lease")
    c.css("#release-lease").click()
    c.wait_text("released")
    check("the lease is released", "released" in c.text())

    def charged():
        c.d.refresh()
        el = c.css("#lease-charge")
        return el.text if not el.text.startswith("0.00") else None

    charge = wait_for("the lease's charge appears", 45, charged, 1.0)
    check("the released lease shows what it was charged", charge.endswith("USD"), charge)
    c.view("#/billing", "Billing")
    c.wait_text("usage")
    check("billing lists the usage charge", "usage" in c.text() and "Balance" in c.text())
    per_pool = c.css("#spend-per-pool svg").get_attribute("aria-label")
    check("billing charts spend per pool", "a100-browser" in per_pool and "USD" in per_pool, per_pool)
    c.shot("billing")


def member(c: Console, seeded: dict) -> None:
    c.sign_in(seeded["member_key"])
    c.wait_text("a100-browser")
    nav = c.d.find_element(By.ID, "nav").text
    check("a member sees pools and leases", "Pools" in nav and "Leases" in nav)
    check("a member sees no create-lease form and no API keys section",
          not c.d.find_elements(By.ID, "lease-form") and "API keys" not in nav, nav)  # fmt: skip
    c.view("#/leases", "Leases")
    c.css("main table a[href^='#/lease/']").click()
    c.css("svg.chart")
    check("a member sees no release or extend on a lease", not c.d.find_elements(By.ID, "release-lease"))


def operator(c: Console, seeded: dict) -> None:
    c.sign_in(seeded["operator_key"])
    card = c.css(f"#fleet [data-pool='{seeded['pool']['id']}']")
    text = card.text.replace("\n", " / ")
    check("the operator sees the fleet at a glance", "4 free, 0 leased, 0 unhealthy of 4 GPUs" in text, text)
    check("the fleet shows the pool's revenue today", "Revenue today:" in text and "today: 0.00" not in text, text)
    c.shot("fleet")
    c.view("#/nodes", "Nodes")
    c.css("button[data-action=cordon][data-node=browser-1]").click()
    c.wait_text("cordoned")
    check("the operator cordons a node", "cordoned" in c.text())
    c.css("button[data-action=uncordon][data-node=browser-1]")
    c.shot("nodes")

    # The node page: a heatmap of each GPU's utilization over the last hour (the lease above ran on it).
    c.css("main a[href^='#/node/']").click()
    c.wait(lambda d: d.find_element(By.CSS_SELECTOR, "main h1").text.startswith("Node browser-1"))

    def heat():
        cells = c.d.find_elements(By.CSS_SELECTOR, "#heatmap rect[data-util]")
        if not cells:
            c.d.refresh()
        return cells or None

    cells = wait_for("the node's heatmap has cells", 30, heat, 1.0)
    rows = {r.get_attribute("y") for r in cells}
    check("the operator sees a node's per-GPU utilization heatmap", len(rows) == GPUS, f"{len(cells)} cells, {len(rows)} GPU rows")
    c.shot("node")
    c.css("button[data-action=maintenance][data-node=browser-1]").click()
    c.wait(lambda d: "maintenance" in d.find_element(By.CSS_SELECTOR, "main h1").text)
    check("the operator puts the node into maintenance", "maintenance" in c.css("main h1").text)
    c.css("button[data-action=uncordon][data-node=browser-1]").click()
    c.wait(lambda d: "ready" in d.find_element(By.CSS_SELECTOR, "main h1").text)
    check("and returns it to service", "ready" in c.css("main h1").text)

    c.view("#/tenants", "Tenants")
    box = c.css("input[data-quota=leases]")
    box.clear()
    box.send_keys("3")
    box.find_element(By.XPATH, "./ancestor::form").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    c.wait(lambda d: "quotas saved" in d.find_element(By.ID, "flash").text)
    check("the operator sets a tenant's quota", c.css("input[data-quota=leases]").get_attribute("value") == "3")

    c.view("#/prices", "Prices")
    price = c.css("input[data-price-pool=a100-browser]")
    price.send_keys("3.10")
    price.find_element(By.XPATH, "./ancestor::form").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    c.wait_text("3.10 USD")
    check("the operator adds a price", "3.10 USD" in c.text())

    c.view("#/invoices", "Invoices")
    c.css("#generate-invoices").click()
    c.css("[data-invoice=open]")
    check("this month's draft cannot be issued while the month is open", not c.d.find_elements(By.CSS_SELECTOR, "button[data-invoice=issue]"))
    # A closed month to issue: last month's draft for the tenant, written straight into the database (the test is
    # about the console's buttons; tests/api/billing.rs proves which months close and what their invoices hold).
    last = previous_month()
    subprocess.run(["psql", "-qX", "-v", "ON_ERROR_STOP=1", os.environ["BROWSER_DATABASE_URL"], "-c",
                    "INSERT INTO invoices (id, tenant_id, month, currency, usage_minor, credits_minor, total_minor, lines) "
                    f"VALUES (gen_random_uuid(), '{seeded['tenant']['id']}', '{last}-01', 'USD', 1234, 0, 1234, '[]')"], check=True)
    c.view(f"#/invoices/{last}", "Invoices")
    c.css("button[data-invoice=issue]").click()
    c.css("button[data-invoice=pay]").click()
    c.wait(lambda d: "paid" in d.find_element(By.TAG_NAME, "main").text)
    check("the operator generates, issues and marks an invoice paid", "browser-ml" in c.text() and "paid" in c.text())
    c.shot("invoices")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--operator-key", required=True)
    p.add_argument("--binary", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--screenshots", default="")
    args = p.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    seeded = seed(Api(args.url), args.operator_key, args.binary, work)
    c = Console(args.url, Path(args.screenshots) if args.screenshots else None)
    try:
        tenant_admin(c, seeded)
        member(c, seeded)
        operator(c, seeded)
    except Failed:
        c.shot("failure")
        (work / "failure.html").write_text(c.d.page_source)
        return 1
    finally:
        c.quit()
    print("browser: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
