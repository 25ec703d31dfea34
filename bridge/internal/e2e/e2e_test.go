//go:build linux

package e2e

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
)

// spec004Tools is the tool list of spec 004, which the extension must offer.
var spec004Tools = []string{
	"navigate", "computer", "read_page", "find", "form_input", "get_page_text",
	"tabs_context", "tabs_context_mcp", "tabs_create", "tabs_create_mcp",
	"resize_window", "read_console_messages", "read_network_requests",
	"upload_image", "gif_creator", "update_plan", "shortcuts_list",
	"shortcuts_execute", "javascript_tool", "turn_answer_start",
	"turn_answer_complete", "dev_utils", "permissions_check",
}

// TestE2E runs the whole chain once (bridge, headless Chromium with the
// extension, the host Chrome starts) and every tool test against it, in
// order; the host-kill test runs last. Its cleanup stops everything and
// fails if a process outlives it.
func TestE2E(t *testing.T) {
	w := startWorld(t, worldOptions{echoHost: true})
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *world)
	}{
		{"tools_list", testToolsList},
		{"navigate", testNavigate},
		{"form_input", testFormInput},
		{"computer_type_and_click", testComputerType},
		{"screenshot", testScreenshot},
		{"console_and_network", testConsoleNetwork},
		{"get_page_text_paginates", testPageText},
		{"read_page_and_find", testReadPageFind},
		{"gif_creator", testGIF},
		{"upload_image", testUploadImage},
		{"background_tab", testBackgroundTab},
		{"small_tools", testSmallTools},
		{"two_sessions", testTwoSessions},
		{"host_killed", testHostKilled},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, w) })
	}
}

func testToolsList(t *testing.T, w *world) {
	c := w.client("e2e-tools-list")
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		if tool.InputSchema == nil {
			t.Errorf("tool %s has no input schema", tool.Name)
		}
	}
	sort.Strings(names)
	var missing []string
	for _, want := range spec004Tools {
		if !slices.Contains(names, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("tools/list lacks %d spec-004 tools: %s\n(offered: %s)", len(missing), strings.Join(missing, ", "), strings.Join(names, ", "))
	}
}
