/**
 * Reads the "Embedded Files" tree `deno compile` prints, so a build can prove what its
 * executable carries. Deno draws one line per entry: `├── name (size)` for a leaf and
 * `├─┬ name (size)` for a directory shown in full; chains of single children are joined
 * with "/", and `dir/*` stands for a directory embedded with every entry it has on disk.
 */

export interface EmbeddedFiles {
  /** Embedded files, relative to the executable's root (the project directory). */
  files: Set<string>;
  /** Directories embedded with all their contents (`dir/*`). */
  wholeDirs: Set<string>;
}

const LINE = /^((?:[│ ] )*)[├└]─([─┬]) (.+?)(?: \([^()]*\))?(?: --> .*)?$/;

// deno colours the tree unless NO_COLOR is set; the parser must not depend on it.
// deno-lint-ignore no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

/** Parses the tree out of `deno compile`'s output; null when there is none. */
export function parseEmbeddedFiles(output: string): EmbeddedFiles | null {
  const lines = output.replace(ANSI, "").split("\n");
  const start = lines.findIndex((l) => l.trim() === "Embedded Files");
  if (start < 0) return null;
  const files = new Set<string>();
  const wholeDirs = new Set<string>();
  const stack: string[] = [];
  // The header, a blank line, then the executable's name as the tree's root.
  let i = start + 1;
  while (i < lines.length && lines[i].trim() === "") i++;
  for (i++; i < lines.length; i++) {
    const m = LINE.exec(lines[i]);
    if (!m) break;
    const depth = m[1].length / 2;
    stack.length = depth;
    const path = [...stack, m[3]].join("/");
    if (m[2] === "┬") {
      stack.push(m[3]);
    } else if (path.endsWith("/*")) {
      wholeDirs.add(path.slice(0, -2));
    } else {
      files.add(path);
    }
  }
  return { files, wholeDirs };
}

/** Whether `relativePath` is embedded, itself or inside a directory embedded whole. */
export function isEmbedded(embedded: EmbeddedFiles, relativePath: string): boolean {
  if (embedded.files.has(relativePath)) return true;
  for (const dir of embedded.wholeDirs) {
    if (relativePath.startsWith(`${dir}/`)) return true;
  }
  return false;
}
