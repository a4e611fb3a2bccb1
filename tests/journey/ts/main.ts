// One real session through the TypeScript SDK, against the journey's server (scripts/run-journey.sh):
// health, API key -> token, the pools with their prices and free GPUs, and a typed error.
//   GPUPLANE_URL=http://127.0.0.1:PORT GPUPLANE_API_KEY=gpk_... node out/main.js
import {
  authenticate,
  createGpuplaneClient,
  GpuplaneError,
  unwrap,
  type GpuplaneClient,
  type Schemas,
} from "@gpuplane/client";

const url = process.env["GPUPLANE_URL"];
const apiKey = process.env["GPUPLANE_API_KEY"];
if (!url || !apiKey) {
  console.error("set GPUPLANE_URL and GPUPLANE_API_KEY");
  process.exit(2);
}

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ""): void {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`);
}

// Compile-time only (never called): the generated types refuse what the API would refuse.
export function typesAreEnforced(client: GpuplaneClient): void {
  // @ts-expect-error gpu_count is a number
  void client.POST("/v1/leases", { body: { gpu_count: "eight", duration_hours: 1 } });
  // @ts-expect-error no such path
  void client.GET("/v1/no-such-path");
  // @ts-expect-error the lease id is a required path parameter
  void client.GET("/v1/leases/{lease_id}", {});
}

async function main(): Promise<void> {
  const anonymous = createGpuplaneClient(url!);
  const health = unwrap(await anonymous.GET("/healthz"));
  check("GET /healthz", typeof health === "object" && health !== null, JSON.stringify(health));

  const client = await authenticate(url!, apiKey!);
  const pools: Schemas["Pool"][] = unwrap(await client.GET("/v1/pools"));
  check(
    "GET /v1/pools with a token",
    Array.isArray(pools) && pools.every((p) => typeof p.free_gpus === "number" && typeof p.gpu_model.key === "string"),
    pools.map((p) => `${p.name}: ${p.free_gpus}/${p.total_gpus} free at ${p.price_per_gpu_hour_minor} ${p.currency} minor/GPU-hour`).join(", "),
  );

  try {
    await authenticate(url!, "gpk_not-a-real-key");
    check("a bad API key is refused", false, "it was accepted");
  } catch (e) {
    check(
      "a bad API key is a typed GpuplaneError (401 unauthorized)",
      e instanceof GpuplaneError && e.status === 401 && e.code === "unauthorized",
      String(e),
    );
  }

  try {
    await client.POST("/v1/admin/pools", {
      body: { name: "", gpu_model: "a100-80g", region: "journey", price_per_gpu_hour_minor: -1, currency: "USD" },
    });
    check("an invalid pool is refused", false, "it was accepted");
  } catch (e) {
    check(
      "an invalid request is a typed 422 validation_failed with field errors",
      e instanceof GpuplaneError && e.status === 422 && e.code === "validation_failed" && e.errors.length > 0,
      e instanceof GpuplaneError ? `${e.code} on ${e.fields.join(", ")}` : String(e),
    );
  }
}

main()
  .catch((e: unknown) => {
    check("journey-ts", false, `crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  })
  .finally(() => {
    console.log(`journey-ts: ${passed} passed, ${failed} failed`);
    process.exitCode = failed ? 1 : 0;
  });
