import { assertEquals } from "../../tests/support/assert.ts";
import { StepBudget } from "./step_budget.ts";

Deno.test("step budget: starts small, then fits the target time, within bounds", () => {
  const b = new StepBudget(150, 16, 512);
  assertEquals(b.tokens(), 64);
  b.observe(100, 1.0); // 10 ms per token: 15 tokens fit, below the floor
  assertEquals(b.tokens(), 16);
  const fast = new StepBudget(150, 16, 512);
  fast.observe(512, 0.05); // a GPU: everything fits
  assertEquals(fast.tokens(), 512);
  const cpu = new StepBudget(150, 16, 512);
  cpu.observe(64, 0.2); // ~3 ms per token
  assertEquals(cpu.tokens(), 48);
  cpu.observe(4, 1.0); // tiny steps say nothing about the per-token cost
  assertEquals(cpu.tokens(), 48);
});
