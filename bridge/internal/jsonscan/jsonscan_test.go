package jsonscan

import (
	"encoding/json"
	"reflect"
	"testing"
)

// members is what EachMember gives for obj, as strings; ok as it returns.
func members(obj string) (got [][2]string, ok bool) {
	ok = EachMember([]byte(obj), func(key, val []byte) bool {
		got = append(got, [2]string{string(key), string(val)})
		return true
	})
	return got, ok
}

func TestEachMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  string
		want [][2]string
		ok   bool
	}{
		{"empty", `{}`, nil, true},
		{"empty with space", " { \n} ", nil, true},
		{"members", `{"a":1,"b":"x","c":null}`, [][2]string{{"a", "1"}, {"b", `"x"`}, {"c", "null"}}, true},
		{"whitespace around everything", " {\t\"a\" :\n [1, {\"b\": \"}\"}] , \"c\":true } ", [][2]string{{"a", `[1, {"b": "}"}]`}, {"c", "true"}}, true},
		{"strings with quotes and brackets", `{"a":"x\"}]{[","b":-1.5e3}`, [][2]string{{"a", `"x\"}]{["`}, {"b", "-1.5e3"}}, true},
		{"duplicate keys, both given", `{"a":1,"a":2}`, [][2]string{{"a", "1"}, {"a", "2"}}, true},
		{"escaped key refused", `{"a\u0062":1}`, nil, false},
		{"not an object", `[1,2]`, nil, false},
		{"a string", `"x"`, nil, false},
		{"empty input", ``, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := members(tc.obj)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("EachMember(%s) = %q, %v; want %q, %v", tc.obj, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestEachMemberTokenKeepsEscapedKeys(t *testing.T) {
	var keys []string
	ok := EachMemberToken([]byte(`{"a\u0062":1,"c":2}`), func(key, _ []byte) bool {
		keys = append(keys, string(key))
		return true
	})
	if !ok || !reflect.DeepEqual(keys, []string{`"a\u0062"`, `"c"`}) {
		t.Errorf("keys %q, ok %v", keys, ok)
	}
}

func TestEachElement(t *testing.T) {
	for _, tc := range []struct {
		arr  string
		want []string
		ok   bool
	}{
		{`[]`, nil, true},
		{` [ ] `, nil, true},
		{`[1,"a,b",{"x":[2]},null]`, []string{"1", `"a,b"`, `{"x":[2]}`, "null"}, true},
		{`{"a":1}`, nil, false},
	} {
		var got []string
		ok := EachElement([]byte(tc.arr), func(val []byte) bool { got = append(got, string(val)); return true })
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("EachElement(%s) = %q, %v; want %q, %v", tc.arr, got, ok, tc.want, tc.ok)
		}
	}
}

// Stopping early reports false.
func TestEachMemberStops(t *testing.T) {
	n := 0
	if EachMember([]byte(`{"a":1,"b":2}`), func(_, _ []byte) bool { n++; return false }) || n != 1 {
		t.Errorf("EachMember went on after false (%d calls) or reported true", n)
	}
}

// Whatever valid JSON object comes in, the members EachMemberToken gives
// are encoding/json's, in order.
func FuzzEachMemberToken(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":[1,{"b":"\"}"}],"c":"\\"}`, ` { "x" : { } } `, `{"\u00e9":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if !json.Valid(b) {
			return
		}
		var want map[string]json.RawMessage
		isObject := json.Unmarshal(b, &want) == nil && SkipSpace(b, 0) < len(b) && b[SkipSpace(b, 0)] == '{'
		got := map[string]json.RawMessage{}
		ok := EachMemberToken(b, func(key, val []byte) bool {
			var k string
			if err := json.Unmarshal(key, &k); err != nil {
				t.Fatalf("key %s is not a string token: %v", key, err)
			}
			if !json.Valid(val) {
				t.Fatalf("value %s of %q is not valid JSON", val, k)
			}
			got[k] = val
			return true
		})
		if ok != isObject {
			t.Fatalf("EachMemberToken(%s) = %v, want %v", s, ok, isObject)
		}
		if ok && len(got) != len(want) {
			t.Fatalf("EachMemberToken(%s) gave %d members, encoding/json %d", s, len(got), len(want))
		}
	})
}
