/**
 * Signed download URLs that expire, as the real hub's do after an hour (here after 2 s):
 * a download cut after its URL expired asks the hub for a fresh one and resumes from the
 * bytes on disk, on the LFS CDN and on the Xet bridge alike; storage that keeps refusing
 * is reported as its own host's refusal, not as the hub's. Through all of it, no log line
 * and no error carries a URL's signature.
 */
import { captureLogs, setLogLevel } from "../../src/common/log.ts";
import { fetchModelFile, type HubError } from "../../src/hub/mod.ts";
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { type HubRepo, sha256 } from "./fake_hub.ts";
import { hubError, noise, withHub } from "./support.ts";

const lines: string[] = [];
captureLogs((line) => lines.push(line));
setLogLevel("debug");

const BIG = noise(8 << 20, 7);
const XET = noise(6 << 20, 11);
const REPO: HubRepo = {
  id: "test-org/Big-GGUF",
  commit: "fedcba9876543210fedcba9876543210fedcba98",
  files: [
    { name: "big-Q8_0.gguf", bytes: BIG, lfs: true },
    { name: "big-Q4_0.gguf", bytes: XET, lfs: true, xet: true },
  ],
};
const REF = { scheme: null, org: "test-org", name: "Big-GGUF" };
const CUT = 5_000_000;

function assertNoSignature(what: string, text: string): void {
  for (const secret of ["Signature=", "Policy=", "X-Amz-Credential", "Key-Pair-Id"]) {
    assert(!text.includes(secret), `${what} carries ${secret}: ${text}`);
  }
}

Deno.test("expiry: a download cut after its URL expired resumes through a fresh one (CDN and Xet)", async () => {
  lines.length = 0;
  await withHub(
    async (hub, source) => {
      // 256 KiB every 200 ms: the first 5 MB take at least 4 s, past the URLs' 2-3 s of life.
      hub.throttle(256 << 10, 200);
      hub.cutNextDownload("big-Q8_0.gguf", CUT);
      hub.cutNextDownload("big-Q4_0.gguf", CUT);
      const [lfs, xet] = await Promise.all([
        fetchModelFile(source, REF, { quant: "q8_0" }),
        fetchModelFile(source, REF, { quant: "q4_0" }),
      ]);
      assertEquals(sha256(await Deno.readFile(lfs.path)), sha256(BIG));
      assertEquals(sha256(await Deno.readFile(xet.path)), sha256(XET));
      for (const [origin, file] of [["cdn", "big-Q8_0.gguf"], ["xet", "big-Q4_0.gguf"]]) {
        const gets = hub.seen.filter((r) => r.origin === origin && r.method === "GET");
        // The resume on the expired URL is refused; the one on the fresh URL goes through.
        assertEquals(gets.map((r) => r.range), ["bytes=0-", `bytes=${CUT}-`, `bytes=${CUT}-`]);
        assert(gets[1].query === gets[0].query && gets[2].query !== gets[1].query, "re-signed");
        const heads = hub.seen.filter((r) => r.method === "HEAD" && r.path.endsWith(file));
        assertEquals(heads.length, 2, `${file}: a second HEAD for a fresh URL`);
      }
      assert(
        lines.some((l) => l.includes("asking the hub for a fresh one")),
        "the refresh is logged",
      );
    },
    [REPO],
    { expirySecs: 2 },
  );
  for (const line of lines) assertNoSignature("log line", line);
});

Deno.test("expiry: storage that refuses every URL is named as the host that refused", async () => {
  lines.length = 0;
  await withHub(
    async (hub, source) => {
      const err = await hubError(
        () => fetchModelFile(source, REF, { quant: "q8_0", download: { maxResumes: 2 } }),
        "download_refused",
      );
      assertStringIncludes(err.message, new URL(hub.cdnUrl).host);
      assertStringIncludes(err.message, "HTTP 403");
      assert(!err.message.includes(new URL(hub.url).host), `names the hub: ${err.message}`);
      assertNoSignature("error", err.message);
      assertEquals((err as HubError).status, 403);
      // The first URL and two fresh ones, each refused.
      const gets = hub.seen.filter((r) => r.origin === "cdn" && r.method === "GET");
      assertEquals(gets.length, 3);
    },
    [REPO],
    { expirySecs: -1 },
  );
  assert(lines.some((l) => l.includes("downloading")), "the download was logged");
  for (const line of lines) assertNoSignature("log line", line);
});
