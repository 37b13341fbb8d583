/**
 * Generates `build_info.json`, the stamp a compiled executable carries: `deno task compile`
 * writes it beside this file, embeds it, and `version.ts` reads it back for `/version` and
 * `neuron --version`. Only the build imports this module, never the node itself.
 */

import { NeuronError } from "./errors.ts";

export class BuildInfoError extends NeuronError {
  declare readonly code: "not_a_git_checkout";

  constructor(message: string, options?: ErrorOptions) {
    super("not_a_git_checkout", message, options);
  }
}

/** The file's shape, as version.ts reads it. */
export interface BuildInfo {
  git_sha: string;
  git_dirty: boolean;
  build_timestamp: string;
  features: string[];
}

export interface GitRevision {
  /** Full sha of HEAD. */
  sha: string;
  /** Tracked files differ from HEAD. */
  dirty: boolean;
  /** Committer time of HEAD. */
  commitTime: Date;
}

/** `build_info.json` of the checkout at `root` (a directory path ending in "/"). */
export function buildInfoPath(root: string): string {
  return `${root}src/common/build_info.json`;
}

function git(root: string, args: string[]): string {
  let out: Deno.CommandOutput;
  try {
    out = new Deno.Command("git", {
      args: ["-C", root, ...args],
      stdout: "piped",
      stderr: "piped",
    }).outputSync();
  } catch (err) {
    throw new BuildInfoError(`cannot run git in ${root}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!out.success) {
    const why = new TextDecoder().decode(out.stderr).trim();
    throw new BuildInfoError(`git ${args.join(" ")} failed in ${root}: ${why}`);
  }
  return new TextDecoder().decode(out.stdout).trim();
}

/** HEAD of the checkout at `root`; a build is always stamped from git, never guessed. */
export function gitRevision(root: string): GitRevision {
  const sha = git(root, ["rev-parse", "HEAD"]);
  const dirty = git(root, ["status", "--porcelain", "--untracked-files=no"]) !== "";
  const seconds = Number(git(root, ["log", "-1", "--format=%ct", "HEAD"]));
  return { sha, dirty, commitTime: new Date(seconds * 1000) };
}

/**
 * The stamp for a build of `revision` carrying `features`. The timestamp is
 * `$SOURCE_DATE_EPOCH` when set (reproducible builds), else now.
 */
export function makeBuildInfo(
  revision: GitRevision,
  features: string[],
  sourceDateEpoch: string | undefined = Deno.env.get("SOURCE_DATE_EPOCH"),
): BuildInfo {
  const epoch = sourceDateEpoch !== undefined && /^\d+$/.test(sourceDateEpoch)
    ? new Date(Number(sourceDateEpoch) * 1000)
    : new Date();
  return {
    git_sha: revision.sha,
    git_dirty: revision.dirty,
    build_timestamp: epoch.toISOString(),
    features,
  };
}

export function writeBuildInfo(root: string, info: BuildInfo): void {
  Deno.writeTextFileSync(buildInfoPath(root), JSON.stringify(info, null, 2) + "\n");
}

/** Removes the stamp so the checkout goes back to asking git. */
export function removeBuildInfo(root: string): void {
  try {
    Deno.removeSync(buildInfoPath(root));
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}
