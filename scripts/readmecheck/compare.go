package main

import (
	"regexp"
	"strings"
)

var (
	numberRE = regexp.MustCompile(`[<>]?[-+−]?\d[\d,]*(\.\d+)?(e[-+]?\d+)?`)
	absPath  = regexp.MustCompile(`(^|[\s(])/[^\s)]*`)
	exitLine = regexp.MustCompile(`^exit \d+$`)
	// kernelSet is the name kvq prints for the SIMD kernel set it picked
	// on this CPU (simd.Kernels), which differs between machines.
	kernelSet = regexp.MustCompile(`\b(?:avx512-zen[45]|avx512|avx2|generic) kernels\b`)
)

// Mask makes a line of output comparable across runs and machines: runs of
// spaces become one, every number becomes # (with a bound's < or >: a
// share printed as "<0.01%" on one machine may be "0.023%" on another,
// whose kernels round differently), absolute paths (a cache
// directory, a temporary one) become <path>, and the kernel set's name
// ("avx512 kernels", "avx512-zen4 kernels", "avx512-zen5 kernels", "avx2
// kernels": the CPU's) becomes "<set> kernels". Labels, names and the order of
// things stay. An "exit N" line, which a document prints with echo, keeps
// its number.
func Mask(line string) string {
	l := strings.Join(strings.Fields(line), " ")
	if exitLine.MatchString(l) {
		return l
	}
	l = absPath.ReplaceAllString(l, "$1<path>")
	l = kernelSet.ReplaceAllString(l, "<set> kernels")
	l = numberRE.ReplaceAllString(l, "#")
	return l
}

// Missing returns the first line of want (masked, blank lines skipped)
// that does not appear in got, in order, and the line of got that came
// closest; "" when every line is found.
func Missing(want []string, got string) (line, closest string) {
	var g []string
	for _, l := range strings.Split(got, "\n") {
		if m := Mask(l); m != "" {
			g = append(g, m)
		}
	}
	j := 0
	for _, w := range want {
		m := Mask(w)
		if m == "" {
			continue
		}
		k := j
		for k < len(g) && g[k] != m {
			k++
		}
		if k == len(g) {
			return w, nearest(m, g[j:])
		}
		j = k + 1
	}
	return "", ""
}

// nearest is the line of lines sharing the longest prefix with m.
func nearest(m string, lines []string) string {
	best, n := "", -1
	for _, l := range lines {
		p := 0
		for p < len(l) && p < len(m) && l[p] == m[p] {
			p++
		}
		if p > n {
			best, n = l, p
		}
	}
	return best
}
