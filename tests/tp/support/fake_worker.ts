/**
 * A stand-in for `neuron --worker` that misbehaves on purpose, for the worker pool's
 * fan-out/drain tests. Every request line is appended to `--log`; `generate_step` is
 * answered according to `--mode`:
 *   ok       generate_step_ok          fail     an error reply (forward_failed)
 *   die      exits with code 3         hang     never answers
 *   garbage  a line that is not JSON  wrong    a reply of the wrong op
 * ping answers pong, shutdown answers bye and exits 0, anything else bad_request.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: { mode: { type: "string" }, log: { type: "string" }, rank: { type: "string" } },
});
const mode = values.mode ?? "ok";
const rank = Number(values.rank ?? 1);
const encoder = new TextEncoder();
const say = (line: string): void => {
  const bytes = encoder.encode(line + "\n");
  for (let off = 0; off < bytes.length;) off += Deno.stdout.writeSync(bytes.subarray(off));
};
const reply = (value: unknown): void => say(JSON.stringify(value));

let buffered = "";
const decoder = new TextDecoder();
for await (const chunk of Deno.stdin.readable) {
  buffered += decoder.decode(chunk, { stream: true });
  for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
    const line = buffered.slice(0, nl);
    buffered = buffered.slice(nl + 1);
    if (values.log) Deno.writeTextFileSync(values.log, line + "\n", { append: true });
    const op = JSON.parse(line).op;
    if (op === "ping") {
      reply({ op: "pong", rank, world_size: 3, cuda_device: rank });
    } else if (op === "shutdown") {
      reply({ op: "bye" });
      Deno.exit(0);
    } else if (op === "generate_step") {
      if (mode === "ok") reply({ op: "generate_step_ok" });
      else if (mode === "fail") reply({ op: "error", kind: "forward_failed", message: "boom" });
      else if (mode === "die") Deno.exit(3);
      else if (mode === "hang") await new Promise(() => setInterval(() => {}, 60_000));
      else if (mode === "garbage") say("this is not json");
      else if (mode === "wrong") reply({ op: "pong", rank, world_size: 3, cuda_device: rank });
    } else {
      reply({ op: "error", kind: "bad_request", message: `unexpected ${op}` });
    }
  }
}
