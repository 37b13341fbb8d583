/**
 * Version and release stamps: `0.1.<UTC commit time>.git<sha7>`, ordered by rpm the way
 * the fleet needs (newer commits upgrade older ones, the final release beats them all).
 */
import { assert, assertEquals } from "../support/assert.ts";
import { lacking } from "../support/tools.ts";
import { checkoutStamps, packageVersion, prereleaseStamps } from "../../rpm/release.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

async function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const out = await new Deno.Command(cmd, {
    args,
    env,
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const dec = new TextDecoder();
  assert(out.success, `${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout).trim();
}

/** rpm's own comparison of two release strings: -1, 0 or 1. */
async function rpmvercmp(a: string, b: string): Promise<number> {
  return Number(await run("rpm", ["--eval", `%{lua: print(rpm.vercmp("${a}", "${b}"))}`]));
}

Deno.test("the release is 0.1.<UTC commit time>.git<sha7>", () => {
  const s = prereleaseStamps("0.1.0", new Date("2026-11-30T23:59:58+03:00"), "c647c2e0123456789");
  assertEquals(s, {
    version: "0.1.0",
    release: "0.1.20261130205958.gitc647c2e",
    shortSha: "c647c2e",
    commitTimestamp: "20261130205958",
  });
});

Deno.test("the checkout's stamps agree with git's own UTC formatting", async () => {
  const stamps = checkoutStamps(ROOT);
  const utc = await run("git", [
    "log",
    "-1",
    "--format=%cd",
    "--date=format-local:%Y%m%d%H%M%S",
    "HEAD",
  ], { TZ: "UTC0" });
  const sha = await run("git", ["rev-parse", "HEAD"]);
  assertEquals(stamps.release, `0.1.${utc}.git${sha.slice(0, 7)}`);
  assertEquals(stamps.version, packageVersion(ROOT));
  const printed = await run(Deno.execPath(), ["run", "-A", "rpm/release.ts"]);
  assertEquals(
    printed.split("\n"),
    [
      `version=${stamps.version}`,
      `release=${stamps.release}`,
      `short_sha=${stamps.shortSha}`,
      `commit_timestamp=${stamps.commitTimestamp}`,
    ],
  );
});

const ORDER = "rpm orders prereleases by commit time, whatever the sha, and below release 1";

Deno.test({
  name: ORDER,
  ignore: lacking(`tests/delivery/release_test.ts, "${ORDER}"`, ["rpm"]),
  fn: async () => {
    const earlier = prereleaseStamps("0.1.0", new Date("2026-11-30T10:00:00Z"), "f9f5fa4").release;
    const later = prereleaseStamps("0.1.0", new Date("2026-11-30T10:00:01Z"), "602e8e1").release;
    assertEquals(await rpmvercmp(earlier, later), -1);
    assertEquals(await rpmvercmp(later, earlier), 1);
    assertEquals(await rpmvercmp(later, "1"), -1);
  },
});
