package jinja

import "testing"

// TestKvrouteChanges checks the behaviour this copy's changes touch (README.md): scopes with more
// variables than the inline array, shadowing across a loop's scope, loop.cycle by the current
// index, and macros' keyword arguments (the one other reader of a scope's variables). The
// expected outputs are what Jinja2 3.1.6 renders for the same templates (checked with python3 -c
// "import jinja2; print(jinja2.Environment().from_string(SRC).render())").
func TestKvrouteChanges(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"eight variables in a loop scope",
			`{% for x in [1] %}{% set a = 1 %}{% set b = 2 %}{% set c = 3 %}{% set d = 4 %}{% set e = 5 %}{% set f = 6 %}{% set g = 7 %}{% set h = 8 %}{% set a = 9 %}{{ a }}{{ b }}{{ g }}{{ h }}{{ x }}{% endfor %}`,
			"92781"},
		{"loop scope does not leak", `{% set v = 'outer' %}{% for x in [1, 2] %}{% set v = 'inner' ~ x %}{{ v }},{% endfor %}{{ v }}`,
			"inner1,inner2,outer"},
		{"namespace crosses the loop scope", `{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}`,
			"6"},
		{"loop.cycle", `{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}`, "abcab"},
		{"loop.cycle called later in the iteration", `{% for x in range(3) %}{% set c = loop.cycle %}{{ c('x', 'y') }}{% endfor %}`, "xyx"},
		{"nested loops", `{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }}{{ loop.cycle('p', 'q') }} {% endfor %}{{ loop.index }};{% endfor %}`,
			"113p 214q 1;123p 224q 2;"},
		{"macro keyword arguments", `{% macro m(a, b=2) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, b=5) }}`, "1215"},
	}
	for _, c := range cases {
		tmpl, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := tmpl.Render(nil)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
