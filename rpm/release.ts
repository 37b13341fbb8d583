/**
 * The version and release every package of one build carries: Version is deno.json's
 * `version`; a prerelease's Release is `0.1.<UTC commit time, yyyymmddHHMMSS>.git<sha7>`,
 * which sorts below the eventual `<version>-1` and orders builds by commit time (the sha
 * alone would sort by rpmvercmp's letter-vs-digit rules, not by age). UTC, whatever time
 * zone the commit was recorded in, so merges made on the server and on laptops interleave
 * correctly.
 *
 *   deno run -A rpm/release.ts   # version=…, release=…, short_sha=…, commit_timestamp=…
 *
 * prints the stamps as lines for $GITHUB_OUTPUT.
 */

import { gitRevision } from "../src/common/build_info.ts";

export interface ReleaseStamps {
  version: string;
  release: string;
  shortSha: string;
  /** yyyymmddHHMMSS in UTC. */
  commitTimestamp: string;
}

/** `2026-11-30T05:04:09Z` → `20261130050409`. */
export function utcStamp(time: Date): string {
  return time.toISOString().replace(/\.\d{3}Z$/, "").replace(/[-:T]/g, "");
}

export function prereleaseStamps(version: string, commitTime: Date, sha: string): ReleaseStamps {
  const shortSha = sha.slice(0, 7);
  const commitTimestamp = utcStamp(commitTime);
  return { version, release: `0.1.${commitTimestamp}.git${shortSha}`, shortSha, commitTimestamp };
}

/** deno.json's `version` of the checkout at `root` (a directory path ending in "/"). */
export function packageVersion(root: string): string {
  const config = JSON.parse(Deno.readTextFileSync(`${root}deno.json`)) as { version?: unknown };
  if (typeof config.version !== "string" || !/^\d+(\.\d+)*$/.test(config.version)) {
    throw new TypeError(`${root}deno.json: "version" must be a dotted number, e.g. "0.1.0"`);
  }
  return config.version;
}

/** The stamps of HEAD of the checkout at `root`. */
export function checkoutStamps(root: string): ReleaseStamps {
  const revision = gitRevision(root);
  return prereleaseStamps(packageVersion(root), revision.commitTime, revision.sha);
}

if (import.meta.main) {
  const s = checkoutStamps(new URL("../", import.meta.url).pathname);
  console.log(
    `version=${s.version}\nrelease=${s.release}\nshort_sha=${s.shortSha}\n` +
      `commit_timestamp=${s.commitTimestamp}`,
  );
}
