// upload_image: puts an image into a file input, or drops it onto a drop
// target, by building a File in the page (DataTransfer) — no file path needed.

import { ToolError } from '../sw/tools.js';
import { usePage } from '../sw/pageload.js';
import { getScreenshot, imageSize } from '../sw/screenshot.js';
import { runAgent } from '../content/agent.js';
import * as props from './props.js';

const EXT = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/gif': 'gif' };
const MAX_CHARS = 30 * 1024 * 1024;

export default {
  name: 'upload_image',
  description:
    'Puts an image (screenshot_id or data) as filename into file input ref, or drops it on ref at drop_point.',
  inputSchema: {
    type: 'object',
    properties: {
      ref: props.ref(),
      screenshot_id: {
        type: 'string',
        pattern: '^shot_[a-z0-9_]+$',
      },
      data: {
        type: 'string',
        maxLength: MAX_CHARS,
        description: 'Base64, no data: prefix',
      },
      mime_type: {
        type: 'string',
        enum: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'],
      },
      filename: {
        type: 'string',
        minLength: 1,
        maxLength: 200,
      },
      drop_point: {
        type: 'array',
        items: { type: 'number' },
        minItems: 2,
        maxItems: 2,
        description: '[x, y] CSS px',
      },
      tabId: props.tabId,
    },
    required: ['ref'],
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: true,
  },
  async run(args, ctx) {
    let base64, mimeType;
    if (args.screenshot_id) {
      const s = getScreenshot(args.screenshot_id);
      if (!s) {
        throw new ToolError(
          `no screenshot ${args.screenshot_id} is kept (only the most recent ones are, and not across a browser restart)`,
        );
      }
      base64 = s.data;
      mimeType = s.mimeType;
    } else if (args.data) {
      base64 = args.data.replace(/^data:[^,]*,/, '').replace(/\s+/g, '');
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) throw new ToolError('data is not valid base64');
      let sz;
      try {
        sz = imageSize(base64);
      } catch {
        sz = null;
      }
      mimeType =
        args.mime_type ||
        (sz ? { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' }[sz.format] : null);
      if (!mimeType) throw new ToolError('could not tell the image type from the data; give mime_type');
    } else {
      throw new ToolError('give screenshot_id or data');
    }
    const name = args.filename || `image.${EXT[mimeType] || 'bin'}`;
    const tab = await usePage(ctx, args.tabId);
    let r;
    try {
      r = await runAgent(tab.id, 'upload', {
        ref: args.ref,
        files: [{ base64, mimeType, name }],
        point: args.drop_point,
      });
    } catch (e) {
      throw new ToolError(e.message);
    }
    const f = r.files[0];
    const text =
      r.mode === 'file-input'
        ? `Put ${f.name} (${f.type}, ${f.size} bytes) into the file input [${args.ref}].`
        : `Dropped ${f.name} (${f.type}, ${f.size} bytes) onto [${args.ref}]${r.accepted ? '; the page handled the drop' : '; the page did not cancel the drop event, so it may not accept files there'}.`;
    return { content: [{ type: 'text', text }] };
  },
};
