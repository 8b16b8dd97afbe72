package openai

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// events reads server-sent events (the WHATWG EventSource format): lines
// "data: ..." accumulate, a blank line ends an event, lines starting with
// ':' are comments (keep-alive pings), other fields (event, id, retry)
// are ignored. Lines end in \n, \r\n or \r.
type events struct {
	r     *bufio.Reader
	queue [][]byte // lines split off at a lone \r
}

func newEvents(r io.Reader) *events { return &events{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next event's data; io.EOF at the end of the body (an
// event without its blank line still counts).
func (e *events) next() ([]byte, error) {
	var data []byte
	have := false
	for {
		line, err := e.line()
		if err == io.EOF && len(line) == 0 {
			if have {
				return data, nil
			}
			return nil, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		switch {
		case len(line) == 0:
			if have {
				return data, nil
			}
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) == "data" {
				if have {
					data = append(data, '\n')
				}
				data = append(data, value...)
				have = true
				if len(data) > maxEvent {
					return nil, fmt.Errorf("%w: an event over %d bytes", ErrProtocol, maxEvent)
				}
			}
		}
		if err == io.EOF {
			if have {
				return data, nil
			}
			return nil, io.EOF
		}
	}
}

// line reads one line without its terminator.
func (e *events) line() ([]byte, error) {
	if len(e.queue) > 0 {
		l := e.queue[0]
		e.queue = e.queue[1:]
		return l, nil
	}
	var out []byte
	for {
		b, err := e.r.ReadSlice('\n')
		out = append(out, b...)
		if err == bufio.ErrBufferFull {
			if len(out) > maxEvent {
				return nil, fmt.Errorf("%w: a line over %d bytes", ErrProtocol, maxEvent)
			}
			continue
		}
		out = bytes.TrimSuffix(out, []byte("\n"))
		out = bytes.TrimSuffix(out, []byte("\r"))
		// A lone \r ends a line too.
		if bytes.IndexByte(out, '\r') >= 0 {
			lines := bytes.Split(out, []byte("\r"))
			out, e.queue = lines[0], lines[1:]
			if err == io.EOF && len(e.queue) > 0 {
				err = nil // the queued lines come first; EOF follows them
			}
		}
		return out, err
	}
}
