import denoConfig from "../../deno.json" with { type: "json" };

/**
 * What this build is, for `/version` and `neuron --version`. A release build (deno compile)
 * writes `build_info.json` beside this file and embeds it; a source checkout asks git.
 */

export interface VersionInfo {
  package_version: string;
  git_sha: string;
  git_dirty: boolean;
  build_timestamp: string;
  target: string;
  features: string[];
  deno_version: string;
}

interface BuildInfo {
  git_sha: string;
  git_dirty: boolean;
  build_timestamp: string;
  features?: string[];
}

/** Capabilities compiled into every build; backends append theirs via build_info.json. */
const BASE_FEATURES = ["native-harness", "external-harness", "metrics"];

const ROOT = new URL("../../", import.meta.url);

function readBuildInfo(): BuildInfo | null {
  try {
    const text = Deno.readTextFileSync(new URL("./build_info.json", import.meta.url));
    return JSON.parse(text) as BuildInfo;
  } catch {
    return null;
  }
}

function git(args: string[]): string | null {
  try {
    const out = new Deno.Command("git", {
      args: ["-C", ROOT.pathname, ...args],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  } catch {
    return null;
  }
}

function fromCheckout(): BuildInfo {
  const sha = git(["rev-parse", "HEAD"]);
  const dirty = sha !== null &&
    (git(["status", "--porcelain", "--untracked-files=no"]) ?? "") !== "";
  let built = new Date();
  try {
    built = Deno.statSync(new URL("main.ts", ROOT)).mtime ?? built;
  } catch {
    // Not a checkout: the start time is the best we know.
  }
  return { git_sha: sha ?? "unknown", git_dirty: dirty, build_timestamp: built.toISOString() };
}

let cached: VersionInfo | null = null;

/** Computed once per process (a git call in a checkout); cheap afterwards. */
export function versionInfo(): VersionInfo {
  if (cached) return cached;
  const build = readBuildInfo() ?? fromCheckout();
  cached = {
    package_version: denoConfig.version,
    git_sha: build.git_sha,
    git_dirty: build.git_dirty,
    build_timestamp: build.build_timestamp,
    target: Deno.build.target,
    features: [...BASE_FEATURES, ...(build.features ?? [])],
    deno_version: Deno.version.deno,
  };
  return cached;
}

/** The one line `neuron --version` prints. */
export function versionLine(): string {
  const v = versionInfo();
  const sha = v.git_sha === "unknown" ? "unknown" : v.git_sha.slice(0, 12);
  return `neuron ${v.package_version} (${sha}${
    v.git_dirty ? "-dirty" : ""
  }, ${v.target}, deno ${v.deno_version})`;
}
