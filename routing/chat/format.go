package chat

import (
	"regexp"
	"strings"
)

// vLLM picks the "openai" content format (content as a list of parts) for a template that loops
// over a message's content, and the "string" format otherwise (vllm/renderers/hf.py
// _detect_content_format @001eadcf): message variables are the targets of for loops over
// messages (or a variable set from messages, a slice of it, or it through filters), and a
// content loop is a for loop over such a variable's .content / ['content'] (again possibly
// sliced or filtered). loopsOverContent does the same on the block tag bodies with regular
// expressions instead of Jinja2's syntax tree.

var (
	forTagRE = regexp.MustCompile(`^\s*for\s+([A-Za-z_]\w*)\s+in\s+(.+?)\s*$`)
	setTagRE = regexp.MustCompile(`^\s*set\s+([A-Za-z_]\w*)\s*=\s*(.+?)\s*$`)
	// sliceRE is an optional slice and filter chain after a variable access.
	accessTail = `\s*(\[[^\]]*:[^\]]*\])?\s*(\|.*)?$`
)

// accessOf reports whether expr is var, var[a:b], or either through filters (vLLM's
// _is_var_or_elems_access without a key), or the same of var.key / var['key'] when key is set.
func accessOf(expr, name, key string) bool {
	expr = strings.TrimSpace(expr)
	for strings.HasPrefix(expr, "(") && strings.HasSuffix(expr, ")") {
		expr = strings.TrimSpace(expr[1 : len(expr)-1])
	}
	pat := `^` + regexp.QuoteMeta(name)
	if key != "" {
		pat += `\s*(\.\s*` + regexp.QuoteMeta(key) + `\b|\[\s*['"]` + regexp.QuoteMeta(key) + `['"]\s*\])`
	} else {
		pat += `\b`
	}
	m, err := regexp.MatchString(pat+accessTail, expr)
	return err == nil && m
}

// loopIter strips a loop's trailing "if cond" and "recursive" from its iterable expression.
func loopIter(expr string) string {
	expr = strings.TrimSuffix(strings.TrimSpace(expr), "recursive")
	if i := strings.Index(expr, " if "); i >= 0 {
		expr = expr[:i]
	}
	return strings.TrimSpace(expr)
}

// loopsOverContent reports whether the block tags contain a loop over a message's content.
func loopsOverContent(blockTags []string) bool {
	msgs := []string{"messages"}
	for i := 0; i < len(msgs); i++ {
		for _, b := range blockTags {
			if m := setTagRE.FindStringSubmatch(b); m != nil && accessOf(m[2], msgs[i], "") && !contains(msgs, m[1]) {
				msgs = append(msgs, m[1])
			}
		}
	}
	var items []string
	for _, b := range blockTags {
		m := forTagRE.FindStringSubmatch(b)
		if m == nil {
			continue
		}
		for _, v := range msgs {
			if accessOf(loopIter(m[2]), v, "") {
				items = append(items, m[1])
				break
			}
		}
	}
	for _, b := range blockTags {
		m := forTagRE.FindStringSubmatch(b)
		if m == nil {
			continue
		}
		for _, v := range items {
			if accessOf(loopIter(m[2]), v, "content") {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
