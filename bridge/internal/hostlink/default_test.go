package hostlink

import (
	"testing"
)

// Default is the first of Browsers: the most recently active, and of
// those active at the same instant the least id.
func TestDefaultIsFirstOfBrowsers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		active map[string]int64 // browser id: last active, unix ns
		want   string           // "" for none
	}{
		{"none", nil, ""},
		{"one", map[string]int64{"a": 5}, "a"},
		{"most recent wins", map[string]int64{"a": 5, "b": 9, "c": 7}, "b"},
		{"a tie goes to the least id", map[string]int64{"c": 9, "b": 9, "a": 1}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(Options{})
			for id, at := range tc.active {
				b := &Browser{id: id}
				b.lastActive.Store(at)
				s.browsers[id] = b
			}
			def, ok := s.Default()
			list := s.Browsers()
			if tc.want == "" {
				if ok || len(list) != 0 {
					t.Fatalf("Default = %v, %v; Browsers = %v; want none", def, ok, list)
				}
				return
			}
			if !ok || def.ID() != tc.want || list[0] != def {
				t.Fatalf("Default = %v, %v; Browsers()[0] = %s; want %s", def, ok, list[0].ID(), tc.want)
			}
			for i := 1; i < len(list); i++ {
				if byRecency(list[i-1], list[i]) >= 0 {
					t.Errorf("Browsers out of order at %d: %s before %s", i, list[i-1].ID(), list[i].ID())
				}
			}
		})
	}
}
