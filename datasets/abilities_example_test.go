package datasets_test

import (
	"fmt"

	"github.com/kvqlabs/kvq/datasets"
)

func ExampleGenerator_MultiHop() {
	e := datasets.New(datasets.Eval, 1).MultiHop(2, 2)
	fmt.Print(e.Prompt)
	fmt.Printf("<answer: %q>\n", e.Answer)
	// Output:
	// Here are keys. Each points to another key or to a number.
	// leoseo-86 points to 51282.
	// stugeos-97 points to leoseo-86.
	// tufer-89 points to dreoshith-44.
	// dreoshith-44 points to 995136.
	// Question: What does stugeos-97 lead to after 2 steps?
	// Answer: stugeos-97 leads to <answer: "51282.\n">
}

func ExampleGenerator_Citation() {
	e := datasets.New(datasets.Eval, 1).Citation(3)
	fmt.Print(e.Prompt)
	fmt.Printf("<answer: %q>\n", e.Answer)
	// Output:
	// Answer the question from the passages and cite the passage number in brackets.
	// [1] Vusherom Bedrul lives in Shiadribreoth and works as a taifial.
	// [2] Zaklestel Taibrim lives in Rekiadreol and works as a vaifimir.
	// [3] Pofin Raidoth lives in Geoklulel and works as a kleovoth.
	// Question: What does Pofin Raidoth work as?
	// Answer: Pofin Raidoth works as a <answer: "kleovoth [3]\n">
}

func ExampleGenerator_ToolCall() {
	e := datasets.New(datasets.Eval, 1).ToolCall()
	fmt.Print(e.Prompt)
	fmt.Printf("<answer: %q>\n", e.Answer)
	// Output:
	// You can call the tool below. Reply with the call as one line of JSON.
	// Tool: {"type": "function", "function": {"name": "book_table", "description": "Book a table at a restaurant.", "parameters": {"type": "object", "properties": {"guest": {"type": "string", "description": "Full name the table is booked under"}, "city": {"type": "string", "description": "City of the restaurant"}, "day": {"type": "integer", "description": "Day of the month"}, "people": {"type": "integer", "description": "Number of people"}}, "required": ["guest", "city", "day", "people"]}}}
	// User: Please book a table for 9 people under the name Teoliabeoth Pofin in Vaival on day 13 of the month.
	// Call: <answer: "{\"name\": \"book_table\", \"arguments\": {\"guest\": \"Teoliabeoth Pofin\", \"city\": \"Vaival\", \"day\": 13, \"people\": 9}}\n">
}

func ExampleGenerator_PasskeyGrid() {
	g := datasets.New(datasets.Eval, 1)
	for _, e := range g.PasskeyGrid([]int{1000, 4000}, datasets.Depths(3)) {
		fmt.Println(e.Meta["context"], e.Meta["depth"], len(e.Prompt), e.Answer == e.Meta["key"]+".\n")
	}
	// Output:
	// 1000 0.00 1181 true
	// 1000 0.50 1181 true
	// 1000 1.00 1177 true
	// 4000 0.00 4151 true
	// 4000 0.50 4147 true
	// 4000 1.00 4151 true
}
