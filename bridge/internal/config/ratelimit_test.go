package config

import (
	"strings"
	"testing"
	"time"
)

func TestRateLimits(t *testing.T) {
	tests := []struct {
		name      string
		json      string
		rate      float64
		burst     int
		loopRate  float64
		loopBurst int
		wait      time.Duration
		wantErr   string // a Decode error containing this, instead
	}{
		{name: "defaults", json: `{}`,
			rate: DefaultRateLimit, burst: 2000, loopRate: DefaultLoopbackRateLimit, loopBurst: 40000, wait: DefaultRateWait},
		{name: "each set", json: `{"rate_limit": 50, "rate_burst": 7, "loopback_rate_limit": 300, "rate_wait": "250ms"}`,
			rate: 50, burst: 7, loopRate: 300, loopBurst: 600, wait: 250 * time.Millisecond},
		{name: "rate_limit 0 leaves loopback limited", json: `{"rate_limit": 0}`,
			loopRate: DefaultLoopbackRateLimit, loopBurst: 40000, wait: DefaultRateWait},
		{name: "loopback_rate_limit 0 leaves remote peers limited", json: `{"loopback_rate_limit": 0}`,
			rate: DefaultRateLimit, burst: 2000, wait: DefaultRateWait},
		{name: "a small rate has a burst of at least 1", json: `{"rate_limit": 0.25, "loopback_rate_limit": 0.1}`,
			rate: 0.25, burst: 1, loopRate: 0.1, loopBurst: 1, wait: DefaultRateWait},
		{name: "rate_wait 0s refuses at once", json: `{"rate_wait": "0s"}`,
			rate: DefaultRateLimit, burst: 2000, loopRate: DefaultLoopbackRateLimit, loopBurst: 40000},
		{name: "negative loopback rate", json: `{"loopback_rate_limit": -5}`, wantErr: `key "loopback_rate_limit": -5 is negative`},
		{name: "rate_wait not a duration", json: `{"rate_wait": "soon"}`, wantErr: `key "rate_wait": "soon" is not a duration`},
		{name: "negative rate_wait", json: `{"rate_wait": "-1s"}`, wantErr: `key "rate_wait"`},
		{name: "rate_wait beyond a minute", json: `{"rate_wait": "2m"}`, wantErr: `key "rate_wait"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tc.json))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode(%s) error = %v, want one containing %q", tc.json, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r, b := c.Rate(); r != tc.rate || b != tc.burst {
				t.Errorf("Rate() = %v, %d; want %v, %d", r, b, tc.rate, tc.burst)
			}
			if r, b := c.LoopbackRate(); r != tc.loopRate || b != tc.loopBurst {
				t.Errorf("LoopbackRate() = %v, %d; want %v, %d", r, b, tc.loopRate, tc.loopBurst)
			}
			if w := c.RateWaitDuration(); w != tc.wait {
				t.Errorf("RateWaitDuration() = %v, want %v", w, tc.wait)
			}
		})
	}
}
