// Server-sent events (the WHATWG "event stream" format), as both MCP HTTP
// transports use them: a POST answered with text/event-stream (Streamable
// HTTP) and the long-lived GET stream of the legacy HTTP+SSE transport whose
// first event is `endpoint`.
//
// Lines end in CRLF, LF or CR (a CR at the end of one chunk and an LF at the
// start of the next are one line end); a leading BOM is dropped; ':' starts a
// comment; `data` lines join with '\n'; `id` sets the last event id (kept
// across events, and also by events without data, like the 2025-11-25
// priming event); `retry` takes digits only; an event with no data is not
// dispatched; an unfinished event at the end of the stream is dropped.

/**
 * @typedef {{event: string, data: string, id: string, retry?: number}} SSEEvent
 *   event defaults to 'message'; id is the last event id so far ('' if none)
 */

/** An incremental parser: push text as it arrives, get events back. */
export class SSEParser {
  /** @param {(ev: SSEEvent) => void} onEvent */
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buf = '';
    this.data = [];
    this.type = '';
    /** The last event id seen (survives events). */
    this.lastEventId = '';
    /** The last reconnection time the server asked for, in ms, or undefined. */
    this.retry = undefined;
    this.started = false;
    this.skipLF = false;
  }

  /** @param {string} text the next piece of the stream, decoded */
  push(text) {
    if (!this.started && text.length) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.skipLF && text[0] === '\n') text = text.slice(1);
    this.skipLF = false;
    this.buf += text;
    let start = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(this.buf.slice(start, i));
      if (c === '\r') {
        if (i + 1 === this.buf.length) this.skipLF = true;
        else if (this.buf[i + 1] === '\n') i++;
      }
      start = i + 1;
    }
    this.buf = this.buf.slice(start);
  }

  /** The stream ended: an unfinished event is dropped (as the standard says). */
  end() {
    this.buf = '';
    this.data = [];
    this.type = '';
  }

  line(line) {
    if (line === '') {
      if (this.data.length) {
        const ev = { event: this.type || 'message', data: this.data.join('\n'), id: this.lastEventId };
        if (this.retry !== undefined) ev.retry = this.retry;
        this.data = [];
        this.type = '';
        this.onEvent(ev);
      } else {
        this.type = '';
      }
      return;
    }
    if (line[0] === ':') return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.type = value;
        break;
      case 'id':
        if (!value.includes('\u0000')) this.lastEventId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        break; // unknown fields are ignored
    }
  }
}

/**
 * Reads an event stream body and yields its events. Breaking out of the loop
 * (or an abort of the fetch) cancels the body.
 * @param {ReadableStream<Uint8Array>} body
 * @param {SSEParser} [parser] to read lastEventId and retry afterwards
 * @returns {AsyncGenerator<SSEEvent>}
 */
export async function* readEvents(body, parser) {
  const queue = [];
  const p = parser || new SSEParser(() => {});
  p.onEvent = (ev) => queue.push(ev);
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let done = false;
  try {
    while (!done) {
      const r = await reader.read();
      done = r.done;
      p.push(done ? decoder.decode() : decoder.decode(r.value, { stream: true }));
      while (queue.length) yield queue.shift();
    }
    p.end();
  } finally {
    if (!done) reader.cancel().catch(() => {});
    try {
      reader.releaseLock();
    } catch {
      // already released
    }
  }
}
