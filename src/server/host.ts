/** `uname -s` spelling of Deno's OS names. */
const OS_NAMES: Record<string, string> = {
  linux: "Linux",
  darwin: "Darwin",
  windows: "Windows",
  freebsd: "FreeBSD",
};

function kernel(): string {
  try {
    return Deno.osRelease();
  } catch {
    return "unknown";
  }
}

function hostname(): string {
  try {
    return Deno.hostname();
  } catch {
    return "unknown";
  }
}

/** hostname, OS (as `uname -s` spells it) and kernel release, for /discovery and /health. */
export function hostFacts(): { hostname: string; os: string; kernel: string } {
  return { hostname: hostname(), os: OS_NAMES[Deno.build.os] ?? Deno.build.os, kernel: kernel() };
}
