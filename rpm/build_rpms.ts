/**
 * `deno task rpm`: helexa-neuron-<flavour> RPMs from a prebuilt executable, with
 * rpm/helexa-neuron-prerelease.spec, into dist/rpm/.
 *
 *   deno task rpm [--binary dist/neuron | --stand-in] [--flavours ada,blackwell,hopper]
 *                 [--out dist/rpm] [--version V] [--release R] [--dist .fc43] [--lint]
 *
 * Version and release default to deno.json's version and the prerelease stamp of HEAD
 * (rpm/release.ts). Needs rpmbuild (Fedora: rpm-build; Debian: rpm). Where rpm lacks
 * Fedora's systemd and firewalld macros, rpm/fallback.macros supplies them, and the
 * BuildRequires naming those macro packages are not checked. `--stand-in` packages a small
 * placeholder program instead of neuron, to exercise packaging where `deno compile` cannot
 * run (no denort base without internet access). `--lint` runs rpmlint (rpm/rpmlint.toml)
 * on the spec and the packages.
 */

import { parseArgs } from "node:util";
import { NeuronError } from "../src/common/errors.ts";
import { ALL_FLAVOURS, isPackageFlavour, type PackageFlavour } from "./flavours.ts";
import { checkoutStamps } from "./release.ts";

export type RpmBuildErrorCode = "bad_usage" | "tool_missing" | "rpmbuild_failed";

export class RpmBuildError extends NeuronError {
  declare readonly code: RpmBuildErrorCode;

  constructor(code: RpmBuildErrorCode, message: string) {
    super(code, message);
  }
}

const RPM_DIR = new URL("./", import.meta.url).pathname;
const ROOT = new URL("../", import.meta.url).pathname;
export const SPEC = `${RPM_DIR}helexa-neuron-prerelease.spec`;
const FALLBACK_MACROS = `${RPM_DIR}fallback.macros`;
const RPMLINT_CONFIG = `${RPM_DIR}rpmlint.toml`;
/** Spec sources besides the executable, all kept beside the spec but LICENSE. */
const SOURCES = [
  `${RPM_DIR}neuron.service`,
  `${RPM_DIR}neuron-sysusers.conf`,
  `${RPM_DIR}helexa-neuron-firewalld.xml`,
  `${RPM_DIR}neuron.toml`,
  `${ROOT}LICENSE`,
];

interface Run {
  success: boolean;
  output: string;
}

async function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, {
      args,
      env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    })
      .output();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new RpmBuildError(
        "tool_missing",
        `${cmd} is not installed (Fedora: dnf install rpm-build rpmlint; Debian: apt-get install ` +
          "rpm rpmlint)",
      );
    }
    throw err;
  }
  const dec = new TextDecoder();
  return { success: out.success, output: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/** Whether rpm lacks Fedora's systemd macros, so rpm/fallback.macros must stand in. */
export async function needsFallbackMacros(): Promise<boolean> {
  const out = await run("rpm", ["--eval", "%{?systemd_post:yes}"]);
  return out.output.trim() !== "yes";
}

export interface PackageSpec {
  flavour: PackageFlavour;
  version: string;
  release: string;
}

function defines(p: PackageSpec): string[] {
  return [
    `neuron_flavour ${p.flavour}`,
    `neuron_version ${p.version}`,
    `neuron_release ${p.release}`,
  ];
}

export interface BuildOptions extends PackageSpec {
  /** The executable to package as /usr/bin/neuron. */
  binary: string;
  /** Where the .rpm goes. */
  outDir: string;
  /** The dist tag, e.g. ".fc43"; default: rpm's own (none outside Fedora). */
  dist?: string;
  fallbackMacros: boolean;
}

/** Builds one flavour's package; returns the .rpm's path. */
export async function buildRpm(options: BuildOptions): Promise<string> {
  const top = Deno.makeTempDirSync({ prefix: "neuron-rpmbuild-" });
  try {
    const sources = `${top}/SOURCES`;
    Deno.mkdirSync(sources, { recursive: true });
    Deno.copyFileSync(options.binary, `${sources}/neuron`);
    for (const file of SOURCES) Deno.copyFileSync(file, `${sources}/${file.split("/").pop()}`);
    const args = [
      "-bb",
      ...(options.fallbackMacros ? ["--load", FALLBACK_MACROS, "--nodeps"] : []),
      ...[
        "_topdir " + top,
        "_sourcedir " + sources,
        "_rpmdir " + `${top}/RPMS`,
        ...defines(options),
      ]
        .flatMap((d) => ["--define", d]),
      ...(options.dist === undefined
        ? []
        : ["--undefine", "dist", "--define", `dist ${options.dist}`]),
      SPEC,
    ];
    const out = await run("rpmbuild", args);
    if (!out.success) {
      throw new RpmBuildError("rpmbuild_failed", `rpmbuild ${options.flavour}:\n${out.output}`);
    }
    const built = [...Deno.readDirSync(`${top}/RPMS/x86_64`)].map((e) => e.name);
    if (built.length !== 1) {
      throw new RpmBuildError("rpmbuild_failed", `expected one package, got ${built.join(", ")}`);
    }
    Deno.mkdirSync(options.outDir, { recursive: true });
    const target = `${options.outDir}/${built[0]}`;
    Deno.copyFileSync(`${top}/RPMS/x86_64/${built[0]}`, target);
    return target;
  } finally {
    Deno.removeSync(top, { recursive: true });
  }
}

/**
 * Compiles the placeholder program packaged by `--stand-in`; `ldflags` (e.g. libraries to
 * link) are appended to the gcc command line.
 */
export async function buildStandIn(path: string, ldflags: string[] = []): Promise<void> {
  const dir = Deno.makeTempDirSync({ prefix: "neuron-stand-in-" });
  try {
    Deno.writeTextFileSync(
      `${dir}/stand_in.c`,
      '#include <stdio.h>\nint main(void) {\n  fputs("neuron packaging stand-in: not a real ' +
        'build\\n", stderr);\n  return 1;\n}\n',
    );
    const out = await run(Deno.env.get("CC") ?? "gcc", [
      "-O2",
      "-o",
      path,
      `${dir}/stand_in.c`,
      ...ldflags,
    ]);
    if (!out.success) throw new RpmBuildError("rpmbuild_failed", `stand-in:\n${out.output}`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

export interface LintResult {
  errors: number;
  warnings: number;
  output: string;
}

/**
 * rpmlint over the spec (parsed with `spec`'s defines, as rpmbuild sees it) and `rpms`.
 * rpmlint has no option for macro definitions, so they go in the ~/.rpmmacros of a
 * throwaway HOME.
 */
export async function lintRpms(
  spec: PackageSpec,
  rpms: string[],
  fallbackMacros: boolean,
): Promise<LintResult> {
  const home = Deno.makeTempDirSync({ prefix: "neuron-rpmlint-" });
  try {
    const macros = (fallbackMacros ? Deno.readTextFileSync(FALLBACK_MACROS) : "") +
      defines(spec).map((d) => `%${d}\n`).join("");
    Deno.writeTextFileSync(`${home}/.rpmmacros`, macros);
    const out = await run("rpmlint", ["-c", RPMLINT_CONFIG, SPEC, ...rpms], { HOME: home });
    const count = (label: string): number =>
      Number(new RegExp(`(\\d+) ${label}`).exec(out.output)?.[1] ?? NaN);
    return { errors: count("errors"), warnings: count("warnings"), output: out.output };
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
}

function parseFlavours(value: string | undefined): PackageFlavour[] {
  if (value === undefined) return [...ALL_FLAVOURS];
  const names = value.split(",").map((s) => s.trim()).filter(Boolean);
  const bad = names.filter((n) => !isPackageFlavour(n));
  if (names.length === 0 || bad.length > 0) {
    throw new RpmBuildError(
      "bad_usage",
      `--flavours: expected a comma-separated list of ${ALL_FLAVOURS.join(", ")}, got ${value}`,
    );
  }
  return names as PackageFlavour[];
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      binary: { type: "string" },
      "stand-in": { type: "boolean", default: false },
      flavours: { type: "string" },
      out: { type: "string", default: "dist/rpm" },
      version: { type: "string" },
      release: { type: "string" },
      dist: { type: "string" },
      lint: { type: "boolean", default: false },
    },
  });
  if (values.binary !== undefined && values["stand-in"]) {
    throw new RpmBuildError("bad_usage", "--binary and --stand-in exclude each other");
  }
  const abs = (p: string): string => (p.startsWith("/") ? p : `${ROOT}${p}`);
  const flavours = parseFlavours(values.flavours);
  const stamps = values.version && values.release ? null : checkoutStamps(ROOT);
  const version = values.version ?? stamps!.version;
  const release = values.release ?? stamps!.release;
  const outDir = abs(values.out);
  let binary = abs(values.binary ?? "dist/neuron");
  const scratch = Deno.makeTempDirSync({ prefix: "neuron-rpm-" });
  try {
    if (values["stand-in"]) {
      binary = `${scratch}/neuron`;
      await buildStandIn(binary);
      console.log("packaging a stand-in executable, not neuron");
    } else {
      try {
        Deno.statSync(binary);
      } catch {
        throw new RpmBuildError(
          "bad_usage",
          `${binary} does not exist: run \`deno task compile\` first (or pass --stand-in)`,
        );
      }
    }
    const fallbackMacros = await needsFallbackMacros();
    const rpms: string[] = [];
    for (const flavour of flavours) {
      const rpm = await buildRpm({
        binary,
        flavour,
        version,
        release,
        outDir,
        dist: values.dist,
        fallbackMacros,
      });
      console.log(`built ${rpm}`);
      rpms.push(rpm);
    }
    if (values.lint) {
      const lint = await lintRpms({ flavour: flavours[0], version, release }, rpms, fallbackMacros);
      console.log(lint.output.trimEnd());
      if (lint.errors !== 0) return 1;
    }
    return 0;
  } finally {
    Deno.removeSync(scratch, { recursive: true });
  }
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (err) {
    if (!(err instanceof NeuronError) && !(err instanceof TypeError)) throw err;
    console.error(`error: ${err.message}`);
    Deno.exit(err instanceof RpmBuildError && err.code === "bad_usage" ? 2 : 1);
  }
}
