package estimate

import (
	"fmt"
	"strconv"
	"strings"
)

// Engine is the serving engine whose accounting a plan follows.
type Engine string

// Engines.
const (
	VLLM   Engine = "vllm"
	SGLang Engine = "sglang"
)

// ParseEngine parses "vllm" or "sglang", case-insensitively.
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(strings.ToLower(strings.TrimSpace(s))); e {
	case VLLM, SGLang:
		return e, nil
	}
	return "", fmt.Errorf("%w: engine %q (valid: vllm, sglang)", ErrPlan, s)
}

// DefaultVLLMVersion is the vLLM version whose accounting plans follow by
// default: the release of the start-up logs the rules were checked against.
const DefaultVLLMVersion = "0.19"

// OldestVLLMVersion and NewestVLLMVersion bound the vLLM releases whose
// accounting the estimator follows: the first release, and the newest whose
// rules it models. A plan for a release outside them is refused.
const (
	OldestVLLMVersion = "0.1"
	NewestVLLMVersion = "0.21"
)

// CheckVLLMVersion parses s and checks that it is a vLLM release the
// estimator knows (OldestVLLMVersion to NewestVLLMVersion, any patch).
func CheckVLLMVersion(s string) (Version, error) {
	v, err := ParseVersion(s)
	if err != nil {
		return v, err
	}
	oldest, _ := ParseVersion(OldestVLLMVersion)
	newest, _ := ParseVersion(NewestVLLMVersion)
	if !v.AtLeast(oldest.Major, oldest.Minor) || v.AtLeast(newest.Major, newest.Minor+1) {
		return v, fmt.Errorf("%w: vLLM version %q is not a release kvq knows the accounting of (valid: %s to %s)", ErrPlan, s, OldestVLLMVersion, NewestVLLMVersion)
	}
	return v, nil
}

// Version is an engine release, major.minor.patch.
type Version struct{ Major, Minor, Patch int }

// ParseVersion parses "0.19", "0.6.3", "v0.10.1.post1" (suffixes after the
// third number are ignored).
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(strings.ToLower(s)), "v")
	parts := strings.SplitN(t, ".", 4)
	var v Version
	dst := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		if i == 3 {
			break
		}
		// Allow "3rc1", "3post1": take the leading digits.
		j := 0
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j == 0 || (j < len(p) && i < 2) {
			return Version{}, fmt.Errorf("%w: version %q (want major.minor[.patch], e.g. 0.19)", ErrPlan, s)
		}
		n, err := strconv.Atoi(p[:j])
		if err != nil {
			return Version{}, fmt.Errorf("%w: version %q", ErrPlan, s)
		}
		*dst[i] = n
	}
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("%w: version %q (want major.minor[.patch], e.g. 0.19)", ErrPlan, s)
	}
	return v, nil
}

// AtLeast reports whether v ≥ major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v Version) String() string {
	if v.Patch == 0 {
		return fmt.Sprintf("%d.%d", v.Major, v.Minor)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// rules are the version-dependent parts of the accounting.
type rules struct {
	// hybrid: vLLM's hybrid KV-cache manager groups sliding-window layers
	// (from 0.10); otherwise every layer counts as full attention.
	hybrid bool
	// perRequestBlocks: concurrency = blocks / Σ groups' worst-case blocks
	// (from 0.10); before, blocks × block_size / max_model_len.
	perRequestBlocks bool
	// cudaGraphs: the CUDA-graph pool estimate is taken from the KV budget
	// (from 0.21).
	cudaGraphs bool
}

func rulesFor(e Engine, v Version, disableHybrid bool) rules {
	if e == SGLang {
		return rules{perRequestBlocks: true}
	}
	newer := v.AtLeast(0, 10)
	return rules{hybrid: newer && !disableHybrid, perRequestBlocks: newer, cudaGraphs: v.AtLeast(0, 21)}
}
