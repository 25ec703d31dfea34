// Reassembly of native.chunk runs (docs/protocol.md, "Chunks"). The host
// splits a message over 1 MiB into notifications
//   {"method":"native.chunk","params":{"id","total","seq","data":"<base64>"}}
// sent in order seq = 0 … total-1 with nothing in between. The receiver
// concatenates the decoded bytes and handles the result as one message. A
// chunk out of order, a bad total or bad base64 drops that message's partial
// data (logged); the host never writes such a run.

/** At most this many chunks make one message (64 MiB of 512 KiB chunks). */
export const MAX_CHUNKS = 128;
/** At most this many bytes make one reassembled message. */
export const MAX_MESSAGE_BYTES = 64 << 20;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Decodes standard base64 into bytes, or returns null if it is not valid.
 * @param {string} s
 * @returns {Uint8Array|null}
 */
export function decodeBase64(s) {
  if (typeof s !== 'string' || !BASE64.test(s)) return null;
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * Creates a reassembler. Its state is one partial message: runs never
 * interleave, and a partial message cannot outlive the port it came on (the
 * caller makes a new reassembler per port).
 * @param {{onMessage: (msg: any) => void, log?: (text: string) => void}} opts
 * @returns {{accept: (params: any) => void, pending: () => boolean}}
 */
export function createReassembler({ onMessage, log = console.warn }) {
  /** @type {{id: string, total: number, next: number, parts: Uint8Array[], size: number}|null} */
  let cur = null;

  function drop(why) {
    log(
      `native.chunk: dropping ${cur ? `message ${JSON.stringify(cur.id)} (${cur.next}/${cur.total} chunks)` : 'chunk'}: ${why}`,
    );
    cur = null;
  }

  function accept(params) {
    const { id, total, seq, data } = params || {};
    if ((typeof id !== 'string' && typeof id !== 'number') || !Number.isInteger(total) || !Number.isInteger(seq)) {
      return drop('a chunk needs id, integer total and integer seq');
    }
    if (total < 1 || total > MAX_CHUNKS) return drop(`total ${total} is outside 1…${MAX_CHUNKS}`);
    if (seq === 0) {
      if (cur) drop(`a new run ${JSON.stringify(id)} started before it ended`);
      cur = { id, total, next: 0, parts: [], size: 0 };
    } else if (!cur || cur.id !== id) {
      return drop(`chunk ${seq} of ${JSON.stringify(id)} arrived without its run's start`);
    }
    if (seq !== cur.next) return drop(`chunk ${seq} arrived when ${cur.next} was expected`);
    if (total !== cur.total) return drop(`total changed from ${cur.total} to ${total}`);
    const bytes = decodeBase64(data);
    if (!bytes) return drop(`chunk ${seq} is not valid base64`);
    cur.size += bytes.length;
    if (cur.size > MAX_MESSAGE_BYTES) return drop(`the message exceeds ${MAX_MESSAGE_BYTES} bytes`);
    cur.parts.push(bytes);
    cur.next++;
    if (cur.next < cur.total) return;

    const whole = new Uint8Array(cur.size);
    let off = 0;
    for (const p of cur.parts) {
      whole.set(p, off);
      off += p.length;
    }
    let msg;
    try {
      msg = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(whole));
    } catch (err) {
      return drop(`the reassembled message is not UTF-8 JSON: ${err.message}`);
    }
    cur = null;
    onMessage(msg);
  }

  return { accept, pending: () => cur !== null };
}
