// Command readmecheck runs the examples of kvq's documentation — the README
// and every Markdown file under docs/ — and of every kvq --help as a user
// would, from a fresh clone's root with ../shared beside it, and compares
// what it can: the exit code (0, or the "exit N" a session echoes) and,
// where a document shows output after a "$ kvq ..." line, every line of it,
// in order, with numbers and absolute paths masked (so labels, names and
// table headers must match; timings may differ). Each document runs in a
// fresh clone of its own, so a document's examples need only the files it
// writes itself ("$ cat FILE").
//
// Markers, written in an example's comment (after " #", or on a comment
// line right above it):
//
//   - "your own": the example needs the user's own download (a model, a
//     text, a server); it is not run. An unmarked example that names an
//     input file a clone does not have fails the check, and so does a
//     marked one that needs nothing of the user's.
//   - a run time of -slow or more ("about 2 minutes", "~45 s", "1m43s"):
//     not run unless -slow 0.
//
// Besides kvq, "go run ./scripts/randmodel ..." lines run, with the
// command built from the checkout the check runs in (they write the random
// checkpoint a document's examples read).
//
// kvq serve, kvq canary and --endpoint examples start or need servers and are not run;
// "$ cat FILE" in a session writes the lines after it to FILE. Usage:
//
//	go run ./scripts/readmecheck [-kvq bin/kvq] [-readme README.md] [-docs docs] [-help=true] [-shared ../shared] [-slow 30s]
//
// -docs takes a comma-separated list of directories (every *.md below them)
// and Markdown files; -readme "" -docs docs/commands -help=false checks the
// command manuals alone.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// options are the command's flags.
type options struct {
	kvq, readme, docs, shared, only string
	help, keep                      bool
	slow, timeout                   time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.kvq, "kvq", "bin/kvq", "the kvq binary to run")
	flag.StringVar(&o.readme, "readme", "README.md", "the README whose examples to run (\"\": none)")
	flag.StringVar(&o.docs, "docs", "docs", "comma-separated directories (every *.md below them) and Markdown files whose examples to run (\"\": none)")
	flag.BoolVar(&o.help, "help", true, "also run the examples of every kvq --help")
	flag.StringVar(&o.shared, "shared", "../shared", "the shared folder a clone has beside it")
	flag.DurationVar(&o.slow, "slow", 30*time.Second, "skip examples whose comment states this run time or more (0: run every one)")
	flag.StringVar(&o.only, "run", "", "run only the examples whose command matches this regular expression")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directories")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "time limit of one example")
	flag.Parse()
	if err := check(o); err != nil {
		fmt.Fprintln(os.Stderr, "readmecheck:", err)
		os.Exit(1)
	}
}

// Documents lists the Markdown files to check: readme (if not empty), then
// every .md file of docs (a comma-separated list of files and directories,
// walked), sorted, each once.
func Documents(readme, docs string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if readme != "" {
		add(readme)
	}
	for _, d := range strings.Split(docs, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		fi, err := os.Stat(d)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			add(d)
			continue
		}
		var found []string
		err = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && strings.HasSuffix(p, ".md") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		for _, p := range found {
			add(p)
		}
	}
	return out, nil
}

func check(o options) error {
	bin, err := filepath.Abs(o.kvq)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (make build writes bin/kvq)", err)
	}
	sharedAbs, err := filepath.Abs(o.shared)
	if err != nil {
		return err
	}
	if _, err := os.Stat(sharedAbs); err != nil {
		return fmt.Errorf("the shared folder: %w", err)
	}
	var filter *regexp.Regexp
	if o.only != "" {
		if filter, err = regexp.Compile(o.only); err != nil {
			return err
		}
	}
	files, err := Documents(o.readme, o.docs)
	if err != nil {
		return err
	}
	// The examples, one group per document and one for the --help texts.
	type group struct {
		name  string
		steps []Step
	}
	var groups []group
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		groups = append(groups, group{f, ParseDoc(filepath.ToSlash(f), string(doc))})
	}
	if o.help {
		help, err := helpSteps(bin)
		if err != nil {
			return err
		}
		groups = append(groups, group{"kvq --help", help})
	}

	tmp, err := os.MkdirTemp("", "kvq-readmecheck-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("working directory:", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	// bin/kvq on PATH as kvq.
	binDir := filepath.Join(tmp, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "kvq")); err != nil {
		return err
	}
	env := append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A fresh clone's root per document: an empty directory with the
	// shared folder beside it.
	newRoot := func(i int) (string, error) {
		dir := filepath.Join(tmp, fmt.Sprintf("doc%d", i))
		root := filepath.Join(dir, "clone")
		if err := os.MkdirAll(root, 0o755); err != nil {
			return "", err
		}
		return root, os.Symlink(sharedAbs, filepath.Join(dir, "shared"))
	}

	type result struct {
		out  string
		code int
		err  error
	}
	var failures []string
	counts := map[Kind]int{}
	fail := func(s Step, format string, args ...any) {
		msg := fmt.Sprintf("%s: %s: %s", s.Source, s.Cmd, fmt.Sprintf(format, args...))
		failures = append(failures, msg)
		fmt.Println("FAIL", msg)
	}
	for gi, g := range groups {
		root, err := newRoot(gi)
		if err != nil {
			return err
		}
		// A command's result is reused within its document only: another
		// document's clone holds other files.
		done := map[string]result{}
		for _, s := range g.steps {
			if s.IsFile() {
				if err := os.WriteFile(filepath.Join(root, s.File), []byte(s.Content), 0o644); err != nil {
					return err
				}
				continue
			}
			k := Classify(s, o.slow)
			if k == Other {
				continue
			}
			counts[k]++
			missing := ""
			for _, in := range Inputs(s.Cmd) {
				if !filepath.IsAbs(in) {
					in = filepath.Join(root, in)
				}
				if _, err := os.Stat(in); err != nil {
					missing = strings.TrimPrefix(in, root+string(filepath.Separator))
					break
				}
			}
			switch {
			case k == YourOwn && missing == "" && len(Inputs(s.Cmd)) > 0:
				fail(s, "marked 'your own' but every file it reads is there: run it (drop the marker)")
				continue
			case k != Run:
				fmt.Printf("skip %-14s %s: %s\n", "("+k.String()+")", s.Source, s.Cmd)
				continue
			case missing != "":
				fail(s, "reads %s, which a fresh clone does not have: use the built-in model or ../shared/..., or say 'your own' in its comment", missing)
				continue
			case filter != nil && !filter.MatchString(s.Cmd):
				continue
			}
			r, ok := done[s.Cmd]
			if !ok {
				start := time.Now()
				cmd := s.Cmd
				if isRandmodel(cmd) {
					// The clone is a bare directory: run the command built
					// from this checkout, on PATH.
					if err := buildRandmodel(binDir); err != nil {
						return err
					}
					cmd = "randmodel " + strings.TrimPrefix(cmd, randmodel)
				}
				r.out, r.code, r.err = runShell(cmd, root, env, o.timeout)
				fmt.Printf("ran  %6.1fs       %s: %s\n", time.Since(start).Seconds(), s.Source, s.Cmd)
				done[s.Cmd] = r
			}
			switch {
			case r.err != nil:
				fail(s, "%v\n%s", r.err, tail(r.out, 20))
			case r.code != 0:
				fail(s, "exit %d\n%s", r.code, tail(r.out, 20))
			default:
				if line, closest := Missing(s.Want, r.out); line != "" {
					fail(s, "the output lacks the documented line\n  want: %s\n  near: %s", strings.TrimSpace(line), closest)
				}
			}
		}
	}
	fmt.Printf("readmecheck: %d documents; %d run, %d skipped as slow, %d need the user's own files, %d servers; %d failed\n",
		len(files), counts[Run], counts[Slow], counts[YourOwn], counts[Server], len(failures))
	if len(failures) > 0 {
		return fmt.Errorf("%d example(s) failed:\n  %s", len(failures), strings.Join(failures, "\n  "))
	}
	return nil
}

// buildRandmodel builds scripts/randmodel of the checkout the check runs
// in (its working directory) into dir, once.
func buildRandmodel(dir string) error {
	p := filepath.Join(dir, "randmodel")
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if out, err := exec.Command("go", "build", "-o", p, "./scripts/randmodel").CombinedOutput(); err != nil {
		return fmt.Errorf("building scripts/randmodel: %v\n%s", err, out)
	}
	return nil
}

// runShell runs cmd with bash in dir, stdout and stderr together.
func runShell(cmd, dir string, env []string, timeout time.Duration) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir, c.Env = dir, env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ctx.Err() != nil {
		return out.String(), -1, fmt.Errorf("still running after %v", timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode(), nil
	}
	return out.String(), 0, err
}

// helpSteps collects the examples of every command's --help, walking
// "Available Commands:".
func helpSteps(bin string) ([]Step, error) {
	var steps []Step
	var walk func(path []string) error
	walk = func(path []string) error {
		out, err := exec.Command(bin, append(append([]string(nil), path...), "--help")...).Output()
		if err != nil {
			return fmt.Errorf("kvq %s --help: %w", strings.Join(path, " "), err)
		}
		name := strings.Join(append([]string{"kvq"}, path...), " ") + " --help"
		steps = append(steps, ParseHelp(name, string(out))...)
		_, cmds, ok := strings.Cut(string(out), "\nAvailable Commands:\n")
		if !ok {
			return nil
		}
		for _, l := range strings.Split(cmds, "\n") {
			if !strings.HasPrefix(l, "  ") {
				break
			}
			f := strings.Fields(l)
			if len(f) == 0 || f[0] == "help" || f[0] == "completion" {
				continue
			}
			if err := walk(append(append([]string(nil), path...), f[0])); err != nil {
				return err
			}
		}
		return nil
	}
	return steps, walk(nil)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
