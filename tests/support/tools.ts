/**
 * External tools some suites check the product with (rpm's, systemd's, PyYAML). The README's
 * set-up does not install them, `.ci/run` does: where one is missing, the tests that need it
 * are ignored (the summary counts them) and a NOTICE line names what is missing and the
 * package that brings it.
 */

/** The need for PyYAML (python3 able to `import yaml`), as `lacking` takes it. */
export const PYYAML = "PyYAML";

/** The Debian package of each tool the suites use; Fedora's names follow in the notice. */
const DEBIAN_PACKAGE: Record<string, string> = {
  rpm: "rpm",
  rpmbuild: "rpm",
  rpmspec: "rpm",
  rpm2cpio: "rpm",
  "/usr/lib/rpm/elfdeps": "rpm",
  rpmlint: "rpmlint",
  cpio: "cpio",
  "systemd-analyze": "systemd",
  "systemd-sysusers": "systemd",
  [PYYAML]: "python3-yaml",
  "g++": "g++",
};

const FEDORA_PACKAGE: Record<string, string> = {
  rpm: "rpm-build",
  rpmlint: "rpmlint",
  cpio: "cpio",
  systemd: "systemd",
  "python3-yaml": "python3-pyyaml",
  "g++": "gcc-c++",
};

function executable(path: string): boolean {
  try {
    const info = Deno.statSync(path);
    return info.isFile && ((info.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** Whether `tool` (a name looked up on PATH, or an absolute path) is an executable here. */
export function hasTool(tool: string): boolean {
  if (tool.startsWith("/")) return executable(tool);
  const path = Deno.env.get("PATH") ?? "";
  return path.split(":").filter(Boolean).some((dir) => executable(`${dir}/${tool}`));
}

/** Whether python3 is here and imports `module`. */
export function hasPythonModule(module: string): boolean {
  if (!hasTool("python3")) return false;
  const out = new Deno.Command("python3", {
    args: ["-c", `import ${module}`],
    stdout: "null",
    stderr: "null",
  }).outputSync();
  return out.success;
}

function present(need: string): boolean {
  return need === PYYAML ? hasPythonModule("yaml") : hasTool(need);
}

/**
 * Whether the tests described by `what` must be ignored for want of one of `needs` (keys of
 * the package table above); prints the notice when they must.
 */
export function lacking(what: string, needs: string[]): boolean {
  const missing = needs.filter((n) => !present(n));
  if (missing.length === 0) return false;
  const debian = [...new Set(missing.map((n) => DEBIAN_PACKAGE[n] ?? n))];
  const fedora = debian.map((p) => FEDORA_PACKAGE[p] ?? p);
  console.warn(
    `NOTICE ${what}: skipped, ${missing.join(", ")} not found (Debian: apt-get install ${
      debian.join(" ")
    }; Fedora: dnf install ${fedora.join(" ")}; .ci/run installs them)`,
  );
  return true;
}
