import { assertEquals } from "../../tests/support/assert.ts";
import { captureLogs } from "../common/log.ts";
import { HarnessError } from "../harness/mod.ts";
import { controlErrorResponse, openaiErrorResponse, ServerError } from "./errors.ts";

captureLogs(() => {});

Deno.test("error mapping: statuses per code, both body forms", async () => {
  // [error, control-plane status, /v1 status when it differs]
  const cases: [Error, number, number?][] = [
    [new ServerError("malformed_json", "x"), 400],
    [new ServerError("invalid_request_body", "x", { param: "model" }), 422, 400],
    [new ServerError("unsupported_media_type", "x"), 415],
    [new ServerError("payload_too_large", "x"), 413],
    [new HarnessError("unknown_harness", "x"), 400],
    [new HarnessError("engine_unavailable", "x"), 400],
    [new HarnessError("path_not_allowed", "x"), 403],
    [new HarnessError("model_not_found", "x"), 404],
    [new HarnessError("already_loaded", "x"), 409],
    [new HarnessError("upstream_error", "x"), 502],
    [new HarnessError("harness_unavailable", "x"), 503],
  ];
  for (const [err, status, v1Status = status] of cases) {
    const flat = controlErrorResponse(err);
    assertEquals(flat.status, status);
    assertEquals(await flat.json(), { error: "x", code: (err as ServerError).code });
    const env = openaiErrorResponse(err);
    assertEquals(env.status, v1Status);
    const body = await env.json();
    assertEquals(body.error.code, (err as ServerError).code);
    assertEquals(body.error.type, status >= 500 ? "server_error" : "invalid_request_error");
  }
  const withParam = await openaiErrorResponse(
    new ServerError("invalid_request_body", "bad", { param: "model" }),
  ).json();
  assertEquals(withParam.error.param, "model");
});

Deno.test("error mapping: retryable answers carry Retry-After; surprises are opaque 500s", async () => {
  const hinted = openaiErrorResponse(
    new HarnessError("harness_unavailable", "x", { retryAfter: 12 }),
  );
  assertEquals(hinted.headers.get("retry-after"), "12");
  await hinted.body?.cancel();
  const stopping = controlErrorResponse(new ServerError("shutting_down", "bye"));
  assertEquals(stopping.status, 503);
  assertEquals(stopping.headers.get("retry-after"), "5");
  await stopping.body?.cancel();
  const boom = openaiErrorResponse(new TypeError("secret internals"));
  assertEquals(boom.status, 500);
  assertEquals((await boom.json()).error.message, "internal error");
});
