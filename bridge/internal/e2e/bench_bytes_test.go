//go:build linux

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replyBytes is what one tool result costs a reader, split by kind: the
// JSON of the whole result as the client receives it, and of it the text
// content, the structured content (its JSON) and the images (their base64,
// as they sit in the JSON), and the result's _meta (ours names the browser
// that answered; no client hands it to a model). The rest is the envelope:
// content types, MIME types, the text's JSON escaping, resource links.
type replyBytes struct {
	json, text, structured, image, meta int
}

func (r replyBytes) add(o replyBytes) replyBytes {
	return replyBytes{r.json + o.json, r.text + o.text, r.structured + o.structured, r.image + o.image, r.meta + o.meta}
}

func (r replyBytes) div(n int) replyBytes {
	if n == 0 {
		return r
	}
	return replyBytes{r.json / n, r.text / n, r.structured / n, r.image / n, r.meta / n}
}

// measureReply splits res's JSON by kind.
func measureReply(res *mcp.CallToolResult) (replyBytes, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return replyBytes{}, err
	}
	b := replyBytes{json: len(raw)}
	for _, c := range res.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			b.text += len(x.Text)
		case *mcp.ImageContent:
			b.image += base64.StdEncoding.EncodedLen(len(x.Data))
		}
	}
	if res.StructuredContent != nil {
		s, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return replyBytes{}, err
		}
		b.structured = len(s)
	}
	if len(res.Meta) > 0 {
		m, err := json.Marshal(res.Meta)
		if err != nil {
			return replyBytes{}, err
		}
		b.meta = len(m)
	}
	return b, nil
}

// String is the cell of the per-step table: JSON, then text / structured /
// image / _meta.
func (r replyBytes) String() string {
	return fmt.Sprintf("%d (%d / %d / %d / %d)", r.json, r.text, r.structured, r.image, r.meta)
}

// stepBytesTable is the markdown of the bytes of each step of the 10-step
// task, per server (bytes per pass), and their sum.
func stepBytesTable(names []string, servers []string, steps [][]replyBytes) string {
	var sb strings.Builder
	sb.WriteString("| step: bytes read, JSON (text / structured / image / _meta) |")
	for _, s := range servers {
		sb.WriteString(" " + s + " |")
	}
	sb.WriteString("\n|---|")
	for range servers {
		sb.WriteString("---:|")
	}
	sb.WriteString("\n")
	totals := make([]replyBytes, len(servers))
	for k, name := range names {
		sb.WriteString("| " + name + " |")
		for i := range servers {
			sb.WriteString(" " + steps[i][k].String() + " |")
			totals[i] = totals[i].add(steps[i][k])
		}
		sb.WriteString("\n")
	}
	sb.WriteString("| **the task** |")
	for i := range servers {
		sb.WriteString(" **" + totals[i].String() + "** |")
	}
	sb.WriteString("\n| the task without its image |")
	for i := range servers {
		fmt.Fprintf(&sb, " %d |", totals[i].json-totals[i].image)
	}
	sb.WriteString("\n| the task without its image or _meta |")
	for i := range servers {
		fmt.Fprintf(&sb, " %d |", totals[i].json-totals[i].image-totals[i].meta)
	}
	sb.WriteString("\n")
	return sb.String()
}

// envTaskDump names a directory to write the 10-step task's answers to (the
// last pass), one file per server: each step's text and structured content.
const envTaskDump = "BROWSERBRIDGE_BENCH_TASK_DUMP"

// dumpTaskStep appends one step's answers to the server's dump file (the
// first step truncates it).
func dumpTaskStep(server string, step int, name string, results []*mcp.CallToolResult) {
	dir := os.Getenv(envTaskDump)
	if dir == "" {
		return
	}
	var sb strings.Builder
	for _, r := range results {
		b, _ := measureReply(r)
		fmt.Fprintf(&sb, "=== %s: %s ===\n", name, b)
		for _, c := range r.Content {
			switch x := c.(type) {
			case *mcp.TextContent:
				fmt.Fprintf(&sb, "[text]\n%s\n", x.Text)
			case *mcp.ImageContent:
				fmt.Fprintf(&sb, "[image %s, %d bytes]\n", x.MIMEType, len(x.Data))
			default:
				raw, _ := json.Marshal(c)
				fmt.Fprintf(&sb, "[%T] %s\n", c, raw)
			}
		}
		if r.StructuredContent != nil {
			raw, _ := json.Marshal(r.StructuredContent)
			fmt.Fprintf(&sb, "[structured]\n%s\n", raw)
		}
	}
	_ = os.MkdirAll(dir, 0o755)
	flag := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if step == 0 {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(filepath.Join(dir, server+"-task.txt"), flag, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(sb.String())
}

// claudeImageTokens is about what Claude charges for a width×height image
// (its vision documentation): width×height/750, after scaling the image
// down to a long edge of at most 1568 px and to about 1,600 tokens. What a
// model pays for an image is its pixels, whatever its format and bytes.
func claudeImageTokens(width, height int) int {
	w, h := float64(width), float64(height)
	if long := max(w, h); long > 1568 {
		w, h = w*1568/long, h*1568/long
	}
	return int(min(w*h/750, 1600))
}
