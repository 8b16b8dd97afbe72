package eval

import (
	"encoding/xml"
	"fmt"
	"io"

	"github.com/kvqlabs/kvq/pkg/eval"
)

// JUnit XML, as CI systems read it: one test suite, one test case per gate
// and cache (and suite row), a <failure> for each failing gate.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Output    string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes rep's gates as JUnit XML.
func WriteJUnit(w io.Writer, rep *eval.Report) error {
	s := junitSuite{Name: "kvq eval gates"}
	for _, g := range rep.Gates {
		c := junitCase{Name: g.Label(), ClassName: "kvq.eval." + g.Cache, Output: fmt.Sprintf("value %s", formatValue(g.Value))}
		if !g.Pass {
			c.Failure = &junitFailure{Message: g.Message, Text: fmt.Sprintf("%s on %s: %s", g.Label(), g.Cache, g.Message)}
			s.Failures++
		} else if g.Message != "" {
			c.Output += "; " + g.Message
		}
		s.Cases = append(s.Cases, c)
		s.Tests++
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
