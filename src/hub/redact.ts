/**
 * What of a URL may be logged or shown. The hub sends downloads to signed URLs whose query
 * (`Signature`, `Policy`, `X-Amz-Credential`, ...) grants an hour of access to a file that
 * may be gated: logs and error messages carry the host and path only.
 */

/** `host/path` of a URL, without its query or fragment. */
export function urlForLog(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname}`;
  } catch {
    return "(unparsable URL)";
  }
}

const URL_QUERY = /(\bhttps?:\/\/[^\s?#"'<>)]*)[?#][^\s"'<>)]*/gi;

/** `text` with the query and fragment of every URL in it cut off (fetch errors quote URLs). */
export function redactUrls(text: string): string {
  return text.replace(URL_QUERY, "$1");
}
