import { assertEquals, assertMatch } from "../../tests/support/assert.ts";
import { COMMANDS, runCli, usage } from "./mod.ts";
import { UsageError } from "./errors.ts";

Deno.test("cli: the command table dispatches by first argument; flags alone mean serve", async () => {
  const seen: [string, string[]][] = [];
  const saved = { ...COMMANDS };
  COMMANDS.serve = {
    summary: "s",
    run: (args) => (seen.push(["serve", args]), Promise.resolve(0)),
  };
  COMMANDS.echo = {
    summary: "print",
    run: (args) => (seen.push(["echo", args]), Promise.resolve(3)),
  };
  COMMANDS.bad = { summary: "b", run: () => Promise.reject(new UsageError("nope")) };
  COMMANDS.boom = { summary: "b", run: () => Promise.reject(new Error("broken")) };
  const quiet = console.error;
  console.error = () => {};
  try {
    assertEquals(await runCli([]), 0);
    assertEquals(await runCli(["-p", "1"]), 0);
    assertEquals(await runCli(["echo", "a", "b"]), 3);
    assertEquals(await runCli(["bad"]), 2);
    assertEquals(await runCli(["boom"]), 1);
    assertEquals(seen, [["serve", []], ["serve", ["-p", "1"]], ["echo", ["a", "b"]]]);
    assertMatch(usage(), /^ {2}echo +print$/m);
  } finally {
    console.error = quiet;
    for (const k of Object.keys(COMMANDS)) delete COMMANDS[k];
    Object.assign(COMMANDS, saved);
  }
});
