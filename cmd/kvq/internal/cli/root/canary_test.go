package root

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestCanaryExitCodes: a bounded kvq canary watch exits 4 on hold (too
// few windows), 3 on rollback (a candidate whose requests fail) and 0 on
// promote, over engine doubles that finish 20 requests between scrapes.
func TestCanaryExitCodes(t *testing.T) {
	engine := func(errEvery int) string {
		var mu sync.Mutex
		n, errs := 0, 0
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			for range 20 {
				n++
				if errEvery > 0 && n%errEvery == 0 {
					errs++
				}
			}
			fmt.Fprintf(w, "vllm:kv_cache_usage_perc 0.5\nvllm:num_preemptions_total 0\n")
			fmt.Fprintf(w, "vllm:request_success_total{finished_reason=\"stop\"} %d\nvllm:request_success_total{finished_reason=\"error\"} %d\n", n-errs, errs)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	base := engine(0)
	for _, c := range []struct {
		name string
		cand string
		args []string
		code int
		out  string
	}{
		{"hold", engine(0), []string{"--duration", "300ms", "--min-windows", "50"}, 4, "HOLD"},
		{"rollback", engine(2), []string{"--duration", "300ms"}, 3, "FAIL error-rate"},
		{"promote", engine(0), []string{"--duration", "1s", "--min-windows", "2"}, 0, "PROMOTE"},
	} {
		args := append([]string{"canary", "watch", "--baseline", base, "--candidate", c.cand, "--window", "100ms", "--probe-rpm", "0"}, c.args...)
		code, out, stderr := run(t, args...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("%s: exit %d, want %d; stdout lacks %q?\n%s%s", c.name, code, c.code, c.out, out, stderr)
		}
	}
}
