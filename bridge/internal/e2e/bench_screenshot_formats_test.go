//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shotVariant is one way to ask computer screenshot for an image.
type shotVariant struct {
	name string
	args map[string]any // added to {action: screenshot}
}

// shotVariants are the formats and qualities measured against the default
// PNG, all at the default size (Chromium encodes WebP at quality 100
// losslessly), and two smaller sizes for what fewer pixels would save in
// tokens.
var shotVariants = func() []shotVariant {
	v := []shotVariant{{"png", map[string]any{"format": "png"}}}
	for _, f := range []string{"jpeg", "webp"} {
		for _, q := range []int{100, 90, 80, 70, 60, 50} {
			v = append(v, shotVariant{fmt.Sprintf("%s q%d", f, q), map[string]any{"format": f, "quality": q}})
		}
	}
	return append(v,
		shotVariant{"png, max_edge 1024", map[string]any{"format": "png", "max_edge": 1024}},
		shotVariant{"webp q80, max_edge 1024", map[string]any{"format": "webp", "quality": 80, "max_edge": 1024}},
	)
}()

// ocrWords is the words tesseract reads in an image (any format Leptonica
// decodes: PNG, JPEG, WebP), lower-cased, with punctuation around them
// dropped; words of one character are left out (OCR noise on icons).
func ocrWords(tb testing.TB, img []byte) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tesseract", "stdin", "stdout", "-l", "eng")
	cmd.Stdin = bytes.NewReader(img)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("tesseract: %v\n%s", err, stderr.String())
	}
	var words []string
	for _, w := range strings.Fields(string(out)) {
		w = strings.ToLower(strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
		if len([]rune(w)) > 1 {
			words = append(words, w)
		}
	}
	return words
}

// wordRecall is the share of want's words (counted with repeats) that got
// also holds.
func wordRecall(want, got []string) float64 {
	if len(want) == 0 {
		return 1
	}
	have := map[string]int{}
	for _, w := range got {
		have[w]++
	}
	hit := 0
	for _, w := range want {
		if have[w] > 0 {
			have[w]--
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}

// BenchmarkScreenshotFormats measures the model-sized screenshot (computer
// screenshot, the default size) of the 10-step task's page and of the six
// pages of issue 32's page set in PNG, JPEG and WebP at several qualities:
// the image's bytes, what a model is charged for it (Claude: about
// width×height/750 tokens, whatever the format), and how legible it is:
// the share of the words tesseract reads in the PNG that it also reads in
// the other image. It prints a markdown table; it needs tesseract
// (apt-get install tesseract-ocr) and skips without it.
//
//	go test -run '^$' -bench ScreenshotFormats -benchtime 1x ./bridge/internal/e2e/
func BenchmarkScreenshotFormats(b *testing.B) {
	if _, err := exec.LookPath("tesseract"); err != nil {
		b.Skip("tesseract is not installed (apt-get install tesseract-ocr): it reads the screenshots")
	}
	w := startWorld(b, worldOptions{})
	c := w.client("e2e-bench-formats")
	pages := []string{"order.html"}
	for _, pt := range pageSet {
		pages = append(pages, pt.page)
	}
	tab := c.newTab(b, w.pages.url(pages[0]))
	type cell struct {
		bytes, width, height int
		recall               float64
		words                int
		took                 time.Duration
	}
	table := make([][]cell, len(pages))
	b.ResetTimer()
	for range b.N {
		for i, page := range pages {
			c.navigate(b, tab, w.pages.url(page))
			table[i] = make([]cell, len(shotVariants))
			var pngWords []string
			for k, v := range shotVariants {
				args := map[string]any{"action": "screenshot", "tabId": tab}
				maps.Copy(args, v.args)
				// The capture's time (encoding included), median of 3.
				var res *mcp.CallToolResult
				took := make([]time.Duration, 3)
				for n := range took {
					start := time.Now()
					res = c.call(b, "computer", args)
					took[n] = time.Since(start)
				}
				p50, _ := quantiles(took)
				data, mime, ok := imageOf(res)
				if !ok {
					b.Fatalf("%s screenshot %s gave no image: %s", page, v.name, describe(res))
				}
				cfg, err := imageSize(data)
				if err != nil {
					b.Fatalf("%s screenshot %s: the %s image: %v", page, v.name, mime, err)
				}
				words := ocrWords(b, data)
				if k == 0 {
					pngWords = words
				}
				table[i][k] = cell{bytes: len(data), width: cfg.Width, height: cfg.Height,
					recall: wordRecall(pngWords, words), words: len(words), took: p50}
			}
		}
	}
	b.StopTimer()

	var sb strings.Builder
	sb.WriteString("| page | image | bytes (× PNG's) | tokens (w×h/750) | words OCR reads (of the PNG's) | call ms, median of 3 |\n|---|---|---:|---:|---:|---:|\n")
	total := make([]int, len(shotVariants))
	for i, page := range pages {
		png := table[i][0]
		for k, v := range shotVariants {
			s := table[i][k]
			total[k] += s.bytes
			fmt.Fprintf(&sb, "| %s | %s, %d×%d | %d (%.2f×) | %d | %.1f%% (%d of %d) | %.0f |\n", page, v.name, s.width, s.height,
				s.bytes, ratio(s.bytes, png.bytes), s.width*s.height/750, 100*s.recall, int(s.recall*float64(png.words)+0.5), png.words, ms(s.took))
		}
	}
	sb.WriteString("\n| image | bytes over the seven pages (× PNG's) | per page, × PNG's | words OCR reads of the PNG's, worst page |\n|---|---:|---:|---:|\n")
	for k, v := range shotVariants {
		lo, hi, worst := 1e9, 0.0, 1.0
		for i := range pages {
			r := ratio(table[i][k].bytes, table[i][0].bytes)
			lo, hi, worst = min(lo, r), max(hi, r), min(worst, table[i][k].recall)
		}
		fmt.Fprintf(&sb, "| %s | %d (%.2f×) | %.2f–%.2f× | %.1f%% |\n", v.name, total[k], ratio(total[k], total[0]), lo, hi, 100*worst)
	}
	fmt.Print(sb.String())
}

// imageSize is the dimensions of a PNG, JPEG or WebP (the standard library
// decodes no WebP; its headers say the size: lossy VP8, lossless VP8L or
// extended VP8X).
func imageSize(data []byte) (image.Config, error) {
	if len(data) >= 30 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP" {
		switch string(data[12:16]) {
		case "VP8 ":
			return image.Config{Width: int(binary.LittleEndian.Uint16(data[26:]) & 0x3fff), Height: int(binary.LittleEndian.Uint16(data[28:]) & 0x3fff)}, nil
		case "VP8L":
			bits := binary.LittleEndian.Uint32(data[21:])
			return image.Config{Width: int(bits&0x3fff) + 1, Height: int(bits>>14&0x3fff) + 1}, nil
		case "VP8X":
			w := int(data[24]) | int(data[25])<<8 | int(data[26])<<16
			h := int(data[27]) | int(data[28])<<8 | int(data[29])<<16
			return image.Config{Width: w + 1, Height: h + 1}, nil
		}
		return image.Config{}, errors.New("a WebP of an unknown kind")
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	return cfg, err
}
