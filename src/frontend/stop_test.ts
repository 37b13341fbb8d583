import { assertEquals } from "../../tests/support/assert.ts";
import { StopMatcher } from "./stop.ts";

function run(stops: string[], pieces: string[]): { text: string; stopped: boolean } {
  const m = new StopMatcher(stops);
  let text = "";
  for (const p of pieces) {
    const r = m.push(p);
    text += r.text;
    if (r.stopped) return { text, stopped: true };
  }
  return { text: text + m.finish(), stopped: false };
}

Deno.test("a stop string split across pieces is never emitted", () => {
  const full = "Hello world. END here";
  for (let i = 0; i <= full.length; i++) {
    for (let j = i; j <= full.length; j++) {
      const pieces = [full.slice(0, i), full.slice(i, j), full.slice(j)];
      assertEquals(run(["END"], pieces), { text: "Hello world. ", stopped: true });
    }
  }
});

Deno.test("the earliest of several stop strings wins", () => {
  assertEquals(run(["world", "lo"], ["Hello world"]), { text: "Hel", stopped: true });
});

Deno.test("held-back text is released when it stops matching or at the end", () => {
  const m = new StopMatcher(["STOP"]);
  assertEquals(m.push("abc ST"), { text: "abc ", stopped: false });
  assertEquals(m.push("AR"), { text: "STAR", stopped: false });
  assertEquals(m.push(" S"), { text: " ", stopped: false });
  assertEquals(m.finish(), "S");
  assertEquals(run([], ["a", "b"]), { text: "ab", stopped: false });
});
