package gateway

import (
	"regexp"
	"strings"
	"testing"
)

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestNormalizeToolName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		name, server, tool, want string
	}{
		{"plain", "memory", "read_graph", "memory_read_graph"},
		{"dashes kept", "everything", "get-sum", "everything_get-sum"},
		{"dots and slashes", "fs", "files/read.v2", "fs_files_read_v2"},
		{"non-ascii", "notes", "résumé", "notes_r_sum_"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := normalizeToolName(tc.server, tc.tool); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("too long keeps a stable hash", func(t *testing.T) {
		a, b := normalizeToolName("srv", long), normalizeToolName("srv", long+"y")
		if len(a) != maxToolName || !toolNamePattern.MatchString(a) || a == b || a != normalizeToolName("srv", long) {
			t.Fatalf("%q / %q", a, b)
		}
	})
}

func TestUniqueToolNameResolvesCollisions(t *testing.T) {
	taken := map[string]toolRoute{}
	var got []string
	// Sorted input, as catalogFor gives it: a.b and a_b collide.
	for _, tool := range []string{"a.b", "a/b", "a_b"} {
		n := uniqueToolName("s", tool, taken)
		taken[n] = toolRoute{server: "s", tool: tool}
		got = append(got, n)
	}
	if strings.Join(got, " ") != "s_a_b s_a_b_2 s_a_b_3" {
		t.Fatalf("got %v", got)
	}
	long := strings.Repeat("z", 70)
	taken = map[string]toolRoute{}
	first := uniqueToolName("s", long, taken)
	taken[first] = toolRoute{}
	second := uniqueToolName("s", long, taken)
	if len(second) > maxToolName || second == first || !toolNamePattern.MatchString(second) {
		t.Fatalf("%q after %q", second, first)
	}
}
