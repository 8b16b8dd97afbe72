package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A Step is one thing an example does: write a file ("$ cat FILE" and its
// lines) or run a command, whose output the document may show.
type Step struct {
	Source  string // "README.md:123", "kvq eval --help"
	Cmd     string // the shell command, continuations joined, comment cut
	Comment string // the example's comment: after " #", or the comment line above it
	File    string // for a file step: the file's name
	Content string // for a file step: its content
	Want    []string
}

// IsFile reports a file step.
func (s Step) IsFile() bool { return s.File != "" }

// Kind is what the check does with a command.
type Kind int

const (
	Run     Kind = iota
	YourOwn      // needs the user's own download: not run
	Slow         // states a run time at or over the threshold: not run
	Server       // starts or talks to a server: not run
	Other        // not a kvq command (make, go test, curl): not run
)

func (k Kind) String() string {
	return [...]string{"run", "your own files", "slow", "server", "not kvq"}[k]
}

// yourOwn is the marker of an example that needs the user's own download.
var yourOwn = regexp.MustCompile(`(?i)\byour own\b`)

// durationRE finds the run times a comment states: "~2 min", "about 60
// minutes", "1m43s", "22 s", "6m22s".
var durationRE = regexp.MustCompile(`(\d+)m(\d+)s|(\d+(?:\.\d+)?)\s*(s|sec|seconds|min|mins|minutes?|h|hours?)\b`)

// StatedDuration is the longest run time comment states, 0 if none.
func StatedDuration(comment string) time.Duration {
	var longest time.Duration
	for _, m := range durationRE.FindAllStringSubmatch(comment, -1) {
		var d time.Duration
		if m[1] != "" {
			mins, _ := strconv.Atoi(m[1])
			secs, _ := strconv.Atoi(m[2])
			d = time.Duration(mins)*time.Minute + time.Duration(secs)*time.Second
		} else {
			x, _ := strconv.ParseFloat(m[3], 64)
			unit := time.Second
			switch {
			case strings.HasPrefix(m[4], "m"):
				unit = time.Minute
			case strings.HasPrefix(m[4], "h"):
				unit = time.Hour
			}
			d = time.Duration(x * float64(unit))
		}
		longest = max(longest, d)
	}
	return longest
}

// Classify says what the check does with a command step.
func Classify(s Step, slow time.Duration) Kind {
	w := Words(s.Cmd)
	switch {
	case len(w) == 0 || w[0] != "kvq":
		return Other
	case yourOwn.MatchString(s.Comment):
		return YourOwn
	case len(w) > 1 && w[1] == "serve", contains(w, "--endpoint"):
		return Server
	case slow > 0 && StatedDuration(s.Comment) >= slow:
		return Slow
	}
	return Run
}

func contains(ws []string, w string) bool {
	for _, x := range ws {
		if x == w || strings.HasPrefix(x, w+"=") {
			return true
		}
	}
	return false
}

// inputFlags are the flags whose value is a file or directory the example
// reads.
var inputFlags = map[string]bool{
	"--model": true, "-m": true, "--tokenizer": true, "--text": true, "--tasks": true, "--data": true,
	"--dataset-path": true, "--trace": true, "--from": true, "--scales": true, "--gates": true,
	"--refusal-phrases": true, "--finetune-from": true, "--fewshot": true,
}

// Inputs lists the paths a kvq command reads, as the user typed them.
// Values of --model that name a preset or a Hugging Face id (no ./, ../
// or / prefix, no file extension) are not paths; --tasks lists may mix
// suite names and .jsonl files.
func Inputs(cmd string) []string {
	w := Words(cmd)
	// The first command of a line only: a list or pipe ends it.
	for i, x := range w {
		if x == ";" || x == "|" || x == "&&" || x == "||" || strings.HasPrefix(x, ">") {
			w = w[:i]
			break
		}
		if strings.HasSuffix(x, ";") {
			w = append(w[:i:i], strings.TrimSuffix(x, ";"))
			break
		}
	}
	var out []string
	for i := 0; i < len(w); i++ {
		flag, val, hasEq := strings.Cut(w[i], "=")
		if !inputFlags[flag] {
			continue
		}
		if !hasEq {
			if i+1 >= len(w) {
				break
			}
			i++
			val = w[i]
		}
		switch flag {
		case "--tasks":
			for _, t := range strings.Split(val, ",") {
				// A data set's NAME=FILE (gsm8k=, arc=, ...) reads FILE.
				if name, file, ok := strings.Cut(t, "="); ok && name != "" && !strings.ContainsAny(name, "/.") {
					t = file
				}
				if strings.HasSuffix(t, ".jsonl") || strings.HasSuffix(t, ".parquet") || strings.Contains(t, "/") {
					out = append(out, t)
				}
			}
		case "--model", "-m":
			if looksLikePath(val) {
				out = append(out, val)
			}
		default:
			out = append(out, val)
		}
	}
	return out
}

func looksLikePath(s string) bool {
	if strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") {
		return true
	}
	for _, ext := range []string{".gguf", ".bin", ".json", ".safetensors"} {
		if strings.HasSuffix(s, ext) {
			return true
		}
	}
	return false
}

// Words splits a shell command into words, with single and double quotes
// and backslash escapes; operators (>, |, ;) stay words of their own when
// spaced.
func Words(cmd string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(cmd) {
				i++
				cur.WriteByte(cmd[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(cmd):
			i++
			cur.WriteByte(cmd[i])
			in = true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// splitComment cuts a shell line at its comment: a '#' after a space,
// outside quotes.
func splitComment(line string) (cmd, comment string) {
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimRight(line[:i], " \t"), strings.TrimSpace(line[i+1:])
		}
	}
	return strings.TrimRight(line, " \t"), ""
}

// isCommand reports a line that starts an example command.
func isCommand(l string) bool {
	return strings.HasPrefix(l, "kvq ") || l == "kvq" || strings.HasPrefix(l, "go run ./cmd/kvq")
}

// normalize turns "go run ./cmd/kvq ARGS" into "kvq ARGS".
func normalize(cmd string) string {
	if rest, ok := strings.CutPrefix(cmd, "go run ./cmd/kvq"); ok {
		return "kvq" + rest
	}
	return cmd
}

// block is a code block of a Markdown document.
type block struct {
	line  int // 1-based line of its first line
	lines []string
	lang  string
}

// blocks finds the fenced blocks and the indented (4-space) blocks.
func blocks(doc string) []block {
	var out []block
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "```") {
			b := block{line: i + 2, lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				b.lines = append(b.lines, lines[i])
			}
			out = append(out, b)
			continue
		}
		if strings.HasPrefix(l, "    ") && strings.TrimSpace(l) != "" && (i == 0 || strings.TrimSpace(lines[i-1]) == "") {
			b := block{line: i + 1}
			for ; i < len(lines) && (strings.HasPrefix(lines[i], "    ") || strings.TrimSpace(lines[i]) == "" && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ")); i++ {
				b.lines = append(b.lines, strings.TrimPrefix(lines[i], "    "))
			}
			i--
			out = append(out, b)
		}
	}
	return out
}

// ParseDoc reads the examples of a Markdown document named name: in each
// code block (not ```go), lines starting with "kvq " are commands; a line
// starting with "$ " is a command whose following lines, up to the next
// "$ " line, are its expected output, or, for "$ cat FILE", the file's
// content.
func ParseDoc(name, doc string) []Step {
	var steps []Step
	for _, b := range blocks(doc) {
		if b.lang != "" && b.lang != "console" && b.lang != "sh" && b.lang != "shell" && b.lang != "text" {
			continue
		}
		steps = append(steps, parseLines(name, b.line, b.lines, "")...)
	}
	return steps
}

// ParseHelp reads the examples of a command's --help (the lines after
// "Examples:" up to a blank line before the next section).
func ParseHelp(name, help string) []Step {
	_, ex, ok := strings.Cut(help, "\nExamples:\n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(ex, "\n") {
		if l != "" && !strings.HasPrefix(l, " ") {
			break // the next section
		}
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	return parseLines(name, 0, lines, name)
}

func parseLines(name string, first int, lines []string, source string) []Step {
	var steps []Step
	var cur *Step
	above := "" // a comment line right above a command
	flush := func() {
		if cur != nil {
			for len(cur.Want) > 0 && strings.TrimSpace(cur.Want[len(cur.Want)-1]) == "" {
				cur.Want = cur.Want[:len(cur.Want)-1]
			}
			if cur.IsFile() {
				cur.Content = strings.Join(cur.Want, "\n") + "\n"
				cur.Want = nil
			}
			steps = append(steps, *cur)
			cur = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		src := source
		if src == "" {
			src = fmt.Sprintf("%s:%d", name, first+i)
		}
		session := strings.HasPrefix(l, "$ ")
		// Inside a session's output a line starting with "kvq " is output
		// (a plan prints kvq commands); only "$ " starts the next command.
		if session || cur == nil && isCommand(l) {
			flush()
			text := strings.TrimPrefix(l, "$ ")
			for strings.HasSuffix(strings.TrimRight(text, " "), "\\") && i+1 < len(lines) {
				i++
				text = strings.TrimRight(strings.TrimSuffix(strings.TrimRight(text, " "), "\\"), " ") + " " + strings.TrimSpace(lines[i])
			}
			cmd, comment := splitComment(text)
			if comment == "" {
				comment = above
			}
			above = ""
			s := Step{Source: src, Cmd: normalize(cmd), Comment: comment}
			if w := Words(cmd); session && len(w) == 2 && w[0] == "cat" {
				s = Step{Source: src, File: w[1]}
			}
			if session {
				cur = &s
			} else {
				steps = append(steps, s)
			}
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(l), "#") && cur == nil {
			above = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
			continue
		}
		if strings.TrimSpace(l) == "" {
			above = ""
		}
		if cur != nil {
			cur.Want = append(cur.Want, l)
		}
	}
	flush()
	return steps
}
