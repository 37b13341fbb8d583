import { NeuronError } from "../common/errors.ts";

/**
 * A request the server refuses before any handler sees it, or a request that ended
 * because its connection did. `status` is what the client is told, if it can still be
 * told anything.
 */
export type HttpErrorCode =
  | "malformed_request"
  | "header_too_large"
  | "version_not_supported"
  | "unsupported_transfer_encoding"
  | "request_timeout"
  | "client_closed";

const STATUS: Record<HttpErrorCode, number> = {
  malformed_request: 400,
  header_too_large: 431,
  version_not_supported: 505,
  unsupported_transfer_encoding: 501,
  request_timeout: 408,
  client_closed: 400,
};

export class HttpError extends NeuronError {
  declare readonly code: HttpErrorCode;
  readonly status: number;

  constructor(code: HttpErrorCode, message: string) {
    super(code, message);
    this.status = STATUS[code];
  }
}
