/**
 * Unpacks what tests/gpu/prepare.sh packed, with nothing but Deno: a GPU host may lack
 * python3, xz, even tar; gzip is decoded by the runtime's DecompressionStream and tar
 * (ustar: regular files and folders, what `tar -czf` of plain trees writes) here.
 *
 *   deno run -A tests/gpu/unpack.ts FILE.tar.gz DIR    unpacks into DIR
 *   deno run -A tests/gpu/unpack.ts FILE.gz OUT        decompresses to OUT
 */

import { dirname, join, normalize } from "node:path";

async function gunzip(path: string): Promise<Uint8Array> {
  const file = await Deno.open(path);
  const stream = file.readable.pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function field(block: Uint8Array, at: number, len: number): string {
  const raw = block.subarray(at, at + len);
  const end = raw.indexOf(0);
  return new TextDecoder().decode(end < 0 ? raw : raw.subarray(0, end));
}

/** Extracts a tar image into `dir`; returns how many files it wrote. */
export function untar(tar: Uint8Array, dir: string): number {
  let files = 0;
  let longName: string | null = null;
  for (let at = 0; at + 512 <= tar.length;) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const size = parseInt(field(header, 124, 12).trim() || "0", 8);
    const type = String.fromCharCode(header[156] || 48);
    const prefix = field(header, 345, 155);
    let name = longName ?? (prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100));
    longName = null;
    const body = tar.subarray(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
    if (type === "L") {
      longName = field(body, 0, body.length);
      continue;
    }
    name = normalize(name);
    if (name.startsWith("..") || name.startsWith("/")) {
      throw new Error(`tar entry outside the target folder: ${name}`);
    }
    const target = join(dir, name);
    if (type === "5") {
      Deno.mkdirSync(target, { recursive: true });
    } else if (type === "0" || type === "7") {
      Deno.mkdirSync(dirname(target), { recursive: true });
      Deno.writeFileSync(target, body, { mode: parseInt(field(header, 100, 8).trim(), 8) });
      files++;
    }
    // Links and pax headers: prepare.sh packs plain trees, so there are none to follow.
  }
  return files;
}

if (import.meta.main) {
  const [from, to] = Deno.args;
  if (!from || !to) {
    console.error("usage: unpack.ts FILE.tar.gz DIR | FILE.gz OUT");
    Deno.exit(2);
  }
  const data = await gunzip(from);
  if (from.endsWith(".tar.gz") || from.endsWith(".tgz")) {
    console.log(`${from}: ${untar(data, to)} files into ${to}`);
  } else {
    const tmp = `${to}.tmp`;
    Deno.writeFileSync(tmp, data);
    Deno.renameSync(tmp, to);
    console.log(`${from}: ${data.length} bytes to ${to}`);
  }
}
