package root

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestModelFlagsOneWording walks the whole command tree: --model,
// --tokenizer, --cache, --device and --threads have one help wording
// wherever they appear (cmdutil's *Usage constants; --model and --cache
// have two, by what the command takes), and each command keeps its names,
// shorthand and default.
func TestModelFlagsOneWording(t *testing.T) {
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &strings.Builder{}, ErrOut: &strings.Builder{}}, Version: "test"}
	// modelRef: the commands that read only the model's shape, so --model
	// also takes a preset. oneCache: the commands whose --cache is one
	// spec, not a list. cacheDefault: each command's --cache default.
	modelRef := map[string]bool{"kvq estimate": true, "kvq plan": true}
	oneCache := map[string]bool{"kvq generate": true}
	cacheDefault := map[string]string{
		"kvq generate":   "fp16",
		"kvq serve":      "fp16",
		"kvq eval":       "fp16,fp8,int8,int4,kivi2",
		"kvq probe eval": "fp16,fp8,int8,int4,kivi2",
		"kvq estimate":   "fp16,fp8,int8,int4,kivi2",
		"kvq bench":      "fp16,fp8,int4,kivi2",
	}
	type want struct {
		usage, shorthand, def string
	}
	wantFor := func(path, name string) want {
		switch name {
		case "model":
			if modelRef[path] {
				return want{cmdutil.ModelRefUsage, "m", ""}
			}
			return want{cmdutil.ModelUsage, "m", ""}
		case "tokenizer":
			return want{cmdutil.TokenizerUsage, "", ""}
		case "cache":
			if oneCache[path] {
				return want{cmdutil.CacheUsage, "", cacheDefault[path]}
			}
			return want{cmdutil.CachesUsage, "", cacheDefault[path]}
		case "device":
			return want{cmdutil.DeviceUsage(cmdutil.Backends()), "", "auto"}
		case "threads":
			return want{cmdutil.ThreadsUsage, "", "0"}
		}
		panic(name)
	}
	has := map[string][]string{} // flag name → the commands that have it
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			switch fl.Name {
			case "model", "tokenizer", "cache", "device", "threads":
			default:
				return
			}
			has[fl.Name] = append(has[fl.Name], path)
			w := wantFor(path, fl.Name)
			if fl.Usage != w.usage {
				t.Errorf("%s --%s: usage %q, want %q", path, fl.Name, fl.Usage, w.usage)
			}
			if fl.Shorthand != w.shorthand {
				t.Errorf("%s --%s: shorthand %q, want %q", path, fl.Name, fl.Shorthand, w.shorthand)
			}
			if fl.DefValue != w.def {
				t.Errorf("%s --%s: default %q, want %q", path, fl.Name, fl.DefValue, w.def)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmd(f))

	// Where the flags are: a command that drops one, or a new command
	// that declares one, shows here.
	loads := []string{"kvq bench", "kvq calibrate", "kvq calibrate audit", "kvq calibrate stats", "kvq eval", "kvq generate", "kvq inspect", "kvq probe eval", "kvq serve"}
	runs := []string{"kvq bench", "kvq calibrate", "kvq calibrate audit", "kvq calibrate stats", "kvq eval", "kvq generate", "kvq probe eval", "kvq serve"}
	for name, paths := range map[string][]string{
		"model":     append(slices.Clone(loads), "kvq estimate", "kvq plan"),
		"tokenizer": loads,
		"cache":     {"kvq bench", "kvq estimate", "kvq eval", "kvq generate", "kvq probe eval", "kvq serve"},
		"device":    runs,
		"threads":   runs,
	} {
		got := slices.Sorted(slices.Values(has[name]))
		want := slices.Sorted(slices.Values(paths))
		if !slices.Equal(got, want) {
			t.Errorf("--%s is on %q, want %q", name, got, want)
		}
	}
}
