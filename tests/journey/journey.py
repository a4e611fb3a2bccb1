#!/usr/bin/env python3
"""The whole tenant journey through the generated Python SDK, against a real gpuplane server and real agents.

Run by scripts/run-journey.sh, which builds the binary, starts the server on a fresh database, bootstraps the
operator key and installs sdk/python into a scratch virtual environment. Uses only the SDK (gpuplane_client,
the generated package, and gpuplane_client_ext, its hand-written helpers) and the standard library.

    python journey.py --url http://127.0.0.1:PORT --operator-key gpk_... --binary target/debug/gpuplane --work-dir DIR

The agents run simulated GPUs (`--simulate a100-80g:4`): these hosts have no PyTorch, so a stub `torchrun` on the
agents' PATH stands in for the launcher; it prints what it was given and runs the job's program, exactly as the
agent rendered it.

Prints one line per check and, last, `journey: N passed, M failed`; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import os
import signal
import stat
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from gpuplane_client import AuthenticatedClient
from gpuplane_client.api.admin import (
    create_api_key_for_tenant,
    create_join_token,
    create_pool,
    create_tenant,
    list_nodes,
)
from gpuplane_client.api.billing import create_ledger_entry, export_usage, get_balance, list_ledger
from gpuplane_client.api.inventory import list_pools
from gpuplane_client.api.jobs import create_job, get_job, get_lease_insights
from gpuplane_client.api.leases import create_lease, get_lease, get_lease_telemetry, release_lease
from gpuplane_client.api.planner import create_advice, create_plan
from gpuplane_client.api.system import get_healthz
from gpuplane_client.models import (
    AdviceQuery,
    AdviceTarget,
    ClusterFields,
    CreateApiKeyRequest,
    CreateJobRequest,
    CreateJoinTokenRequest,
    CreateLeaseRequest,
    CreateLedgerEntryRequest,
    CreatePoolRequest,
    CreateTenantRequest,
    EntryKind,
    Job,
    JobState,
    LeaseState,
    LedgerEntry,
    ModelRef,
    Node,
    NodeState,
    PlanRequest,
    Problem,
    Telemetry,
    TenantRole,
    WorkloadFields,
    WorkloadKind,
)
from gpuplane_client.types import UNSET, Response, Unset
from gpuplane_client_ext import GpuplaneError, login, raise_for_problem
from gpuplane_client_ext import create_lease as create_lease_safely

T = TypeVar("T")

GPU = "a100-80g"
GPUS_PER_NODE = 4
NODES = 2
PRICE_PER_GPU_HOUR_MINOR = 3600  # one minor unit per GPU-second: a short lease still costs something visible
TOP_UP_MINOR = 1_000_000
MODEL = "llama2-7b"
TRAINING_TOKENS = 100_000_000
# The "training script": takes whatever the rendered template appends (DeepSpeed's `--deepspeed_config ...`, ...).
JOB_COMMAND = ["/bin/echo", "simulated training: done"]

# Stands in for torchrun on simulated hosts: prints its arguments and the environment the agent gave it (the
# journey checks the rendered variables arrived), lets the job be seen running, then runs the program torchrun
# would run, with its arguments (what follows torchrun's own `--` options; `--no-python` is torchrun's flag).
TORCHRUN_STUB = """#!/bin/sh
echo "simulated torchrun: $*"
env | sort
sleep 4
while [ $# -gt 0 ]; do
  case "$1" in
    --no-python) shift; break ;;
    --*) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""


class Journey:
    def __init__(self, args: argparse.Namespace) -> None:
        self.url: str = args.url.rstrip("/")
        self.operator_key: str = args.operator_key
        self.binary = Path(args.binary).resolve()
        self.work = Path(args.work_dir).resolve()
        self.pid_file = self.work / "agents.pids"
        self.passed = 0
        self.failed = 0
        self.agents: list[subprocess.Popen[bytes]] = []
        self.facts: dict[str, Any] = {}

    # --- bookkeeping -----------------------------------------------------------------------------------------
    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            print(f"ok   {name}" + (f": {detail}" if detail else ""), flush=True)
        else:
            self.failed += 1
            print(f"FAIL {name}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    def require(self, name: str, ok: bool, detail: str = "") -> None:
        if not self.check(name, ok, detail):
            raise Stop(name)

    @staticmethod
    def call(response: Response[Problem | T]) -> T:
        """The parsed body of a `sync_detailed` response, typed; a GpuplaneError for any error status."""
        return raise_for_problem(response)

    def wait(self, what: str, secs: float, probe: Callable[[], T | None], every: float = 0.5) -> T:
        deadline = time.monotonic() + secs
        while True:
            last = probe()
            if last:
                return last
            if time.monotonic() > deadline:
                self.require(f"{what} (within {secs:.0f} s)", False, "timed out")
            time.sleep(every)

    # --- agents ----------------------------------------------------------------------------------------------
    def start_agent(self, join_token: str, n: int) -> str:
        bin_dir = self.work / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        stub = bin_dir / "torchrun"
        stub.write_text(TORCHRUN_STUB)
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        state_dir = self.work / f"agent-{n}"
        out_path = self.work / f"agent-{n}.out"
        env = dict(os.environ)
        env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        env.setdefault("RUST_LOG", "warn")
        with open(out_path, "wb") as out, open(self.work / f"agent-{n}.log", "wb") as err:
            agent = subprocess.Popen(
                [str(self.binary), "agent", "--server", self.url, "--join-token", join_token,
                 "--simulate", f"{GPU}:{GPUS_PER_NODE}", "--hostname", f"journey-{n}", "--state-dir", str(state_dir),
                 # Jobs run sandboxed: the stub's directory is shared with them read-only, and each agent on this
                 # one machine gets job uids of its own, as separate hosts would.
                 "--job-ro-bind", str(bin_dir), "--job-uids", f"{290000 + 100 * n}-{290099 + 100 * n}"],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        self.agents.append(agent)
        with open(self.pid_file, "a") as pids:
            pids.write(f"{agent.pid}\n")

        def registered() -> str | None:
            if agent.poll() is not None:
                self.require(f"agent journey-{n} runs", False, f"exited {agent.returncode}; see {out_path}")
            line = out_path.read_text().splitlines()[:1]
            return line[0] if line and line[0].startswith("gpuplane agent: node ") else None

        line = self.wait(f"agent journey-{n} registered", 30, registered, 0.1)
        self.check(f"agent journey-{n} registered through the join token", "registered" in line, line)
        return line.split()[3]

    def stop_agents(self) -> None:
        for agent in self.agents:
            if agent.poll() is None:
                agent.terminate()
        for agent in self.agents:
            try:
                agent.wait(timeout=15)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()

    # --- the journey -----------------------------------------------------------------------------------------
    def run(self) -> None:
        url = self.url
        # Operator: the bootstrapped key is given.
        op = login(url, self.operator_key)
        health = get_healthz.sync_detailed(client=op)
        self.require("GET /healthz", health.status_code == 200, f"{int(health.status_code)}")

        tenant = self.call(create_tenant.sync_detailed(client=op, body=CreateTenantRequest(name="journey-ml")))
        key = self.call(
            create_api_key_for_tenant.sync_detailed(
                tenant.id, client=op, body=CreateApiKeyRequest(name="journey admin", role=TenantRole.TENANT_ADMIN)
            )
        )
        self.check("operator creates a tenant and its admin key", key.api_key.startswith("gpk_"), str(tenant.id))
        top_up = CreateLedgerEntryRequest(
            kind=EntryKind.TOPUP, amount_minor=TOP_UP_MINOR, currency="USD", reason="journey top-up"
        )
        entry = self.call(create_ledger_entry.sync_detailed(tenant.id, client=op, body=top_up))
        self.check(
            "operator tops up the balance", entry.amount_minor == TOP_UP_MINOR, f"{entry.amount_minor} USD minor"
        )

        pool = self.call(
            create_pool.sync_detailed(
                client=op,
                body=CreatePoolRequest(
                    name="a100-journey", gpu_model=GPU, region="journey",
                    price_per_gpu_hour_minor=PRICE_PER_GPU_HOUR_MINOR, currency="USD",
                ),
            )
        )  # fmt: skip
        self.check("operator creates an a100-80g pool", pool.gpu_model.key == GPU, str(pool.id))
        join = self.call(
            create_join_token.sync_detailed(pool.id, client=op, body=CreateJoinTokenRequest(max_uses=NODES))
        )
        self.check("operator mints a join token", bool(join.join_token), join.prefix)

        node_ids = [self.start_agent(join.join_token, n) for n in range(1, NODES + 1)]

        def both_ready() -> list[Node] | None:
            page = self.call(list_nodes.sync_detailed(client=op, pool_id=pool.id))
            ready = [n for n in page.items if n.state == NodeState.READY and str(n.id) in node_ids]
            return ready if len(ready) == NODES else None

        ready = self.wait("both nodes ready", 30, both_ready)
        gpus = sum(len(n.gpus) for n in ready)
        self.check("both nodes are ready with their GPUs", gpus == NODES * GPUS_PER_NODE, f"{gpus} GPUs")

        # Tenant: key -> token, pools, advice, plan.
        tc = login(url, key.api_key)
        pools = self.call(list_pools.sync_detailed(client=tc))
        mine = [p for p in pools if p.id == pool.id]
        self.check(
            "tenant lists pools and sees the free GPUs",
            len(mine) == 1
            and mine[0].free_gpus == NODES * GPUS_PER_NODE
            and mine[0].largest_free_block == GPUS_PER_NODE,
            f"{mine[0].free_gpus if mine else '?'} free, largest block {mine[0].largest_free_block if mine else '?'}",
        )

        model = ModelRef(preset=MODEL)
        workload = WorkloadFields(kind=WorkloadKind.LORA)
        advice = self.call(
            create_advice.sync_detailed(
                client=tc,
                body=AdviceQuery(model=model, workload=workload, target=AdviceTarget(training_tokens=TRAINING_TOKENS)),
            )
        )
        option = next((o for o in advice.options if o.pool_id == str(pool.id)), None)
        self.require(
            "advice for a 7B LoRA fine-tune ranks the pool",
            option is not None and option.hours > 0 and option.cost_minor > 0,
            f"{option.gpu_count} x {option.gpu_key}, {option.hours:.2f} h, {option.cost_minor} minor"
            if option
            else f"options: {[o.pool_id for o in advice.options]}",
        )

        plan = self.call(
            create_plan.sync_detailed(
                client=tc,
                body=PlanRequest(
                    model=model,
                    workload=workload,
                    cluster=ClusterFields(gpu=GPU, gpus=NODES * GPUS_PER_NODE, gpus_per_node=GPUS_PER_NODE),
                ),
            )
        )
        best = plan.plans[0] if plan.plans else None
        self.require(
            "plan on 8 x a100-80g",
            best is not None and best.tp * best.pp * best.dp == NODES * GPUS_PER_NODE,
            f"tp {best.tp} pp {best.pp} dp {best.dp} zero {best.zero_stage}, {best.tokens_per_s:.0f} tokens/s"
            if best
            else "no plan",
        )

        # A typed error through the SDK: more GPUs than the pool has.
        try:
            self.call(
                create_lease.sync_detailed(
                    client=tc, body=CreateLeaseRequest(pool_id=pool.id, gpu_count=64, duration_hours=1)
                )
            )
            self.check("a lease larger than any pool is refused", False, "it was accepted")
        except GpuplaneError as e:
            self.check(
                "a lease larger than any pool is a typed 422 validation_failed on gpu_count",
                e.status == 422 and e.code == "validation_failed" and "gpu_count" in e.field_names(),
                str(e),
            )

        # Lease all 8 GPUs through the helper that sends an Idempotency-Key and retries with it: a create whose
        # answer was lost may have committed, and retrying it with the same key returns that lease.
        lease_body = CreateLeaseRequest(pool_id=pool.id, gpu_count=NODES * GPUS_PER_NODE, duration_hours=1)
        lease_key = f"journey-{time.time_ns()}"
        lease = create_lease_safely(tc, lease_body, idempotency_key=lease_key)
        again = create_lease_safely(tc, lease_body, idempotency_key=lease_key)
        self.check(
            "retrying a lease create with its Idempotency-Key returns the same lease, not a second one",
            again.id == lease.id,
            f"{lease.id} / {again.id}",
        )
        lease_nodes = {str(g.node_id) for g in lease.gpus}
        self.require(
            "tenant leases 8 GPUs over both nodes",
            lease.state == LeaseState.ACTIVE and len(lease.gpus) == NODES * GPUS_PER_NODE and len(lease_nodes) == NODES,
            str(lease.id),
        )

        # A planned job, run by both agents. Not `auto`: auto picks the gpuplane-runtime template for a training
        # script, and these simulated hosts have only the stand-in torchrun (their agents report no
        # gpuplane_runtime, so the service would refuse it: 422 launcher_missing).
        job = self.call(
            create_job.sync_detailed(
                lease.id,
                client=tc,
                body=CreateJobRequest(template="torchrun-ddp", model=model, workload=workload, command=JOB_COMMAND),
            )
        )
        self.check(
            "a torchrun-ddp job is planned and rendered for every node",
            len(job.nodes) == NODES and job.plan is not None,
            f"template {job.template}",
        )

        def job_state(states: set[JobState]) -> Job | None:
            j = self.call(get_job.sync_detailed(job.id, client=tc))
            return j if j.state in states else None

        running = self.wait(
            "the job runs", 60, lambda: job_state({JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED})
        )
        self.check("the agents start the job", running.state != JobState.FAILED, f"{running.state.value}")
        insights = self.call(get_lease_insights.sync_detailed(lease.id, client=tc))
        self.check(
            "the lease's insights answer for the job",
            insights.lease_id == lease.id and (isinstance(insights.job_id, Unset) or insights.job_id in (None, job.id)),
            f"{len(insights.insights)} findings, job {'-' if isinstance(insights.job_id, Unset) else insights.job_id}",
        )
        done = self.wait(
            "the job ends", 90, lambda: job_state({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
        )
        self.require(
            "the job runs to completion on both agents",
            done.state == JobState.SUCCEEDED and all(n.exit_code == 0 for n in done.nodes),
            f"{done.state.value}; "
            + ", ".join(f"{n.hostname}: {n.state.value} exit {n.exit_code}" for n in done.nodes)
            + (
                ""
                if done.state == JobState.SUCCEEDED
                else f"; reason {done.reason}; tails {[n.output_tail for n in done.nodes]}"
            ),
        )
        envs = [
            dict(line.split("=", 1) for line in n.output_tail if "=" in line and not line.startswith("simulated"))
            for n in done.nodes
        ]
        self.check(
            "the job's program ran on every node",
            all(any(line.startswith(JOB_COMMAND[1]) for line in n.output_tail) for n in done.nodes),
            next((line for line in done.nodes[0].output_tail if line.startswith(JOB_COMMAND[1])), "no output"),
        )
        self.check(
            "every process got its rendered environment",
            all(e.get("WORLD_SIZE") == str(NODES * GPUS_PER_NODE) for e in envs)
            and sorted(e.get("NODE_RANK", "?") for e in envs) == [str(r) for r in range(NODES)],
            ", ".join(f"rank {e.get('NODE_RANK')}: CUDA_VISIBLE_DEVICES={e.get('CUDA_VISIBLE_DEVICES')}" for e in envs),
        )

        # Telemetry of the lease's GPUs.
        def telemetry() -> Telemetry | None:
            t = self.call(get_lease_telemetry.sync_detailed(lease.id, client=tc, step_s=1))
            has_util = isinstance(t.avg_gpu_util, float | int)
            return t if has_util and len(t.gpus) == NODES * GPUS_PER_NODE else None

        t = self.wait("lease telemetry", 30, telemetry)
        self.check("the lease's telemetry covers its 8 GPUs", True, f"average utilization {t.avg_gpu_util:.2f}")

        # Release, then wait for metering to charge the whole lease.
        released = self.call(release_lease.sync_detailed(lease.id, client=tc))
        ended_at = released.ended_at
        self.require(
            "tenant releases the lease",
            released.state == LeaseState.RELEASED and isinstance(ended_at, dt.datetime),
            f"ended {ended_at}",
        )
        assert isinstance(ended_at, dt.datetime)  # required just above

        def ledger_entries() -> list[LedgerEntry]:
            items: list[LedgerEntry] = []
            after: UUID | Unset = UNSET
            while True:
                page = self.call(list_ledger.sync_detailed(client=tc, limit=500, after=after))
                items.extend(page.items)
                if isinstance(page.next_after, Unset) or page.next_after is None:
                    return items
                after = page.next_after

        def export_rows() -> list[dict[str, str]]:
            since = lease.created_at - dt.timedelta(minutes=1)
            until = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)
            return [r for r in self.export_csv(tc, since, until) if r["lease_id"] == str(lease.id)]

        def fully_metered() -> tuple[list[LedgerEntry], list[dict[str, str]]] | None:
            usage = [e for e in ledger_entries() if e.kind == EntryKind.USAGE and e.lease_id == lease.id]
            if not usage:
                return None
            rows = export_rows()
            # Metering charges whole seconds up to the lease's end; the last fraction of a second is never charged.
            last_end = max((dt.datetime.fromisoformat(r["period_end"]) for r in rows), default=None)
            if last_end is None or (ended_at - last_end).total_seconds() >= 1:
                return None
            return usage, rows

        usage, rows = self.wait("metering charges the released lease", 60, fully_metered, 1.0)
        charged = -sum(e.amount_minor for e in usage)
        exported = sum(int(r["amount_minor"]) for r in rows)
        seconds = sum(int(r["gpu_seconds"]) for r in rows)
        self.check("metering charged the lease", charged > 0, f"{charged} minor for {seconds} GPU-seconds")
        self.check(
            "the usage export's total equals what the ledger charged for the lease",
            exported == charged,
            f"export {exported} = ledger {charged}",
        )
        balance = self.call(get_balance.sync_detailed(client=tc))
        mine_balance = [b for b in balance if b.currency == "USD"] if isinstance(balance, list) else [balance]
        self.check(
            "the balance is the top-up less the charges",
            len(mine_balance) == 1 and mine_balance[0].balance_minor == TOP_UP_MINOR - charged,
            f"{mine_balance[0].balance_minor if mine_balance else '?'} minor",
        )
        after = self.call(get_lease.sync_detailed(lease.id, client=tc))
        self.check("the lease stays released", after.state == LeaseState.RELEASED, after.state.value)

    def export_csv(self, client: AuthenticatedClient, since: dt.datetime, until: dt.datetime) -> list[dict[str, str]]:
        """GET /v1/billing/usage/export as CSV, through the generated `export_usage`."""
        text = self.call(export_usage.sync_detailed(client=client, from_=since, to=until))
        return list(csv.DictReader(io.StringIO(text)))


class Stop(Exception):
    """A failed check that later steps depend on."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("GPUPLANE_URL"), required="GPUPLANE_URL" not in os.environ)
    parser.add_argument(
        "--operator-key",
        default=os.environ.get("GPUPLANE_OPERATOR_KEY"),
        required="GPUPLANE_OPERATOR_KEY" not in os.environ,
    )
    parser.add_argument("--binary", default=os.environ.get("GPUPLANE_BIN", "target/debug/gpuplane"))
    parser.add_argument("--work-dir", default=None, help="agent state, logs and pid file (default: a temp dir)")
    args = parser.parse_args()
    if args.work_dir is None:
        import tempfile

        args.work_dir = tempfile.mkdtemp(prefix="gpuplane-journey-")
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)

    journey = Journey(args)
    # SIGTERM (run-journey.sh's cleanup, a CI timeout) still stops the agents, in the `finally` below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    try:
        journey.run()
    except Stop:
        pass
    except GpuplaneError as e:
        journey.check("API call", False, f"unexpected error {e}")
    except Exception:  # noqa: BLE001 - report and count any crash of the journey itself
        traceback.print_exc()
        journey.check("journey script", False, "crashed (traceback above)")
    finally:
        journey.stop_agents()
    if journey.failed:
        print(f"logs: {args.work_dir}")
    print(f"journey took {time.monotonic() - started:.0f} s")
    print(f"journey: {journey.passed} passed, {journey.failed} failed")
    return 1 if journey.failed else 0


if __name__ == "__main__":
    sys.exit(main())
