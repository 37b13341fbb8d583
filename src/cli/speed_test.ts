import { assertEquals } from "../../tests/support/assert.ts";
import { SpeedMeter } from "./speed.ts";

const token = (id: number) => ({ id, bytes: new Uint8Array(0) });
const usage = { promptTokens: 3, completionTokens: 0, cachedTokens: 0, reasoningTokens: 0 };

Deno.test("prompt speed runs to the first token; generation counts the decode steps after it", () => {
  const meter = new SpeedMeter();
  meter.accepted(100, 1000);
  meter.observe({ type: "delta", content: "x", tokens: [token(1)] }, 1250);
  // A token holding part of a character comes without content; it still took its step.
  meter.observe({ type: "delta", tokens: [token(2)] }, 1350);
  meter.observe({ type: "delta", content: "yz", tokens: [token(3), token(4)] }, 1650);
  assertEquals(meter.lines(), [
    "prompt: 100 tokens in 250.00 ms, 400.00 tokens/s",
    "generation: 4 tokens, 3 decode steps in 400.00 ms, 7.50 tokens/s",
  ]);
});

Deno.test("a run that generated nothing reports no rate rather than a division by zero", () => {
  const meter = new SpeedMeter();
  meter.accepted(3, 5);
  meter.observe({
    type: "done",
    finishReason: "error",
    usage,
    fault: { code: "x", message: "y" },
  }, 9);
  assertEquals(meter.lines(), [
    "prompt: 3 tokens in 0.00 ms, - tokens/s",
    "generation: 0 tokens, 0 decode steps in 0.00 ms, - tokens/s",
  ]);
});
