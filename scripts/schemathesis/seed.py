"""Seed a fresh gpuplane for the contract run and print the credentials and ids as shell assignments.

A tenant with a balance, its admin and member keys, a pool, an agent registered with a join token (its node
carries the lease), a lease and a job on it. Standard library only.
"""

import json
import sys
import urllib.request

base, operator_key = sys.argv[1], sys.argv[2]


def call(method, path, token=None, body=None, expect=(200, 201)):
    req = urllib.request.Request(base + path, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, data) as res:
            status, text = res.status, res.read()
    except urllib.error.HTTPError as err:
        status, text = err.code, err.read()
    if status not in expect:
        sys.exit(f"seed: {method} {path} -> {status}: {text[:500]!r}")
    return json.loads(text) if text else None


def token_for(key):
    return call("POST", "/v1/auth/token", body={"api_key": key})["access_token"]


op = token_for(operator_key)
tenant = call("POST", "/v1/admin/tenants", op, {"name": "contract-tenant"})
call("POST", f"/v1/admin/tenants/{tenant['id']}/ledger", op,
     {"kind": "topup", "amount_minor": 1_000_000_000, "currency": "USD", "reason": "contract run"})
admin_key = call("POST", f"/v1/admin/tenants/{tenant['id']}/api-keys", op,
                 {"name": "contract-admin", "role": "tenant_admin"})["api_key"]
member_key = call("POST", f"/v1/admin/tenants/{tenant['id']}/api-keys", op,
                  {"name": "contract-member", "role": "tenant_member"})["api_key"]
pool = call("POST", "/v1/admin/pools", op, {"name": "contract-h100", "gpu_model": "h100", "region": "test-1",
                                            "price_per_gpu_hour_minor": 200, "currency": "USD"})
join = call("POST", f"/v1/admin/pools/{pool['id']}/join-tokens", op, {"max_uses": 1, "ttl_hours": 1})
gpus = [{"index": i, "uuid": f"GPU-contract-{i}", "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85_520_809_984}
        for i in range(8)]
agent = call("POST", "/v1/agent/register", body={"join_token": join["join_token"], "node": {
    "hostname": "contract-node", "address": "contract-node.test", "gpus": gpus, "intra_link": "nvlink",
    "driver_version": "550.54.15", "cuda_version": "12.4", "network_gbps": 400, "rdma": True}})
call("POST", "/v1/agent/heartbeat", agent["agent_token"], {"samples": []})
admin = token_for(admin_key)
lease = call("POST", "/v1/leases", admin, {"pool_id": pool["id"], "gpu_count": 2, "duration_hours": 24})
job = call("POST", f"/v1/leases/{lease['id']}/jobs", admin,
           {"template": "deepspeed", "model": {"preset": "llama2-7b"}, "command": ["train.py"],
            "workload": {"kind": "lora", "seq_len": 2048, "global_batch": 64}})

values = {
    "OPERATOR_TOKEN": op, "ADMIN_TOKEN": admin, "MEMBER_TOKEN": token_for(member_key),
    "AGENT_TOKEN": agent["agent_token"], "TENANT_ID": tenant["id"], "POOL_ID": pool["id"],
    "NODE_ID": agent.get("node_id", ""), "LEASE_ID": lease["id"], "JOB_ID": job["id"],
}
for name, value in values.items():
    print(f"{name}={value}")
