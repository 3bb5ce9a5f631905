package app

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/textdata"
)

// TokenModel is the seam between generate and a language model. A
// generated model that does not implement it is run through
// causalWindow (its batch-1 inference plan, a whole forward pass per
// token); one that keeps a KV cache implements it to compute only the new
// positions; the tests implement it with a bigram table. It is shaped for a KV cache: keep says how many leading ids of
// ctx are those of the previous call, unchanged, so a model that caches
// each position's keys and values computes only the positions after
// them; one without a cache runs its forward pass on all of ctx and
// ignores keep. keep is 0 on the first call and whenever the window
// moves (ctx is then the last contextJump(Context()) ids, all moved).
type TokenModel interface {
	// Context is T, the most ids the model reads.
	Context() int
	// NextLogits returns the logits of the token after ctx (1 ≤ len(ctx)
	// ≤ Context()): one per vocabulary id. The slice may be the model's
	// buffer, valid until the next call.
	NextLogits(ctx []int32, keep int) []float32
}

// BF16Decoder is a TokenModel whose decode can multiply its dense layers
// in bfloat16 (generate --precision bf16; the CPU programs' KV cache): a
// token then reads half the bytes of float32 weights, which bounds the
// rate of a core that streams them.
type BF16Decoder interface {
	TokenModel
	// DefaultBF16 reports whether generate multiplies in bf16 unless told
	// otherwise: the model's spec trains in bf16.
	DefaultBF16() bool
	// DecodeBF16 makes the next NextLogits multiply in bfloat16 (the
	// weights as they are now, rounded once, and each input row) or in
	// float32; the caches start over.
	DecodeBF16(on bool)
}

// decodePrecision checks generate's --precision against what tm can do
// and returns whether it multiplies in bfloat16: "" is the model's default.
func decodePrecision(tm TokenModel, p string) (bool, error) {
	bd, ok := tm.(BF16Decoder)
	switch p {
	case "":
		return ok && bd.DefaultBF16(), nil
	case "f32":
		return false, nil
	case "bf16":
		if !ok {
			return false, usageError{"--precision bf16: this program generates in f32 only (bf16 needs the CPU program's KV cache; --kv-cache=false and the GPU programs have none)"}
		}
		return true, nil
	}
	return false, usageError{fmt.Sprintf("--precision %s: want f32 or bf16", quoteShort(p))}
}

// DecodePoolEnv, set to 1, makes generate split the decode's kernels
// through rt/cpu's ParallelFor rather than its decode team: a switch for
// timing the two (bench/gpu/cpuhost.sh).
const DecodePoolEnv = "MLBUILD_DECODE_POOL"

// DecodePartEnv, set to N, makes the decode team's steps split into parts
// of at least N KB of weights (rt/cpu's SetDecodePartBytes; default 16):
// a switch for measuring that rule on another machine
// (bench/gpu/decode-scaling.sh).
const DecodePartEnv = "MLBUILD_DECODE_PART_KB"

// Sampling says how generate picks each token from the logits.
type Sampling struct {
	// Temperature divides the logits before the softmax; 0 picks the
	// largest logit (greedy; the lowest id among equals).
	Temperature float64
	// TopK keeps the K largest logits (the lower ids among equals at the
	// edge); 0 keeps them all.
	TopK int
}

// pick is the id drawn from logits: the greedy choice at temperature 0,
// else one of the TopK largest with probability softmax(logit/T) among
// them, from one draw of rng. scratch is reused between calls.
func (s Sampling) pick(logits []float32, rng *rand.Rand, scratch *[]int) int32 {
	if s.Temperature == 0 || s.TopK == 1 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return int32(best)
	}
	order := (*scratch)[:0]
	for i := range logits {
		order = append(order, i)
	}
	*scratch = order
	if s.TopK > 0 && s.TopK < len(logits) {
		sort.SliceStable(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
		order = order[:s.TopK]
	}
	mx := math.Inf(-1)
	for _, i := range order {
		mx = math.Max(mx, float64(logits[i]))
	}
	var sum float64
	for _, i := range order {
		sum += math.Exp((float64(logits[i]) - mx) / s.Temperature)
	}
	u := rng.Float64() * sum
	for _, i := range order {
		u -= math.Exp((float64(logits[i]) - mx) / s.Temperature)
		if u < 0 {
			return int32(i)
		}
	}
	return int32(order[len(order)-1]) // rounding left u at 0
}

// contextJump is how many of the latest ids a full window of T keeps when
// generate moves it: half of it. A window that slid by one id a token
// would move every cached position, so that each token cost a whole
// forward pass over T positions once the text outgrew the context (a
// 1,000-token sample of a context of 256 ran at a thirtieth of the
// cache's speed); jumping by half, a token costs about two positions'
// work, and the model reads between T/2 and T ids of context (nanoGPT's
// sampler always reads T, at T positions' work a token). The same rule
// holds with and without the cache, so both draw the same text.
func contextJump(T int) int { return max(1, T/2) }

// generate writes n tokens after prompt to w, each as soon as it is
// drawn, and returns the ids it drew. The prompt must be non-empty and
// its every token in vocab; the model's logits must have a value for
// each vocabulary id (and the pad id). A model trained on documents
// (vocab.Pad, documents mode) ends a document with the pad id: when it
// draws it, generate stops there, the pad id the last of the ids
// returned and nothing written for it.
func generate(w io.Writer, m TokenModel, vocab *textdata.Vocab, prompt string, n int, s Sampling, seed uint64) ([]int32, error) {
	if prompt == "" {
		return nil, usageError{"--prompt is empty: give the text to continue (at least one token)"}
	}
	ids, err := vocab.Encode(prompt)
	if err != nil {
		return nil, usageError{fmt.Sprintf("--prompt %s: %v; the model knows only the %d tokens of its training text", quoteShort(prompt), err, vocab.Size())}
	}
	T := m.Context()
	rng := rand.New(rand.NewPCG(seed, 0x6d6c6275696c64)) // "mlbuild"
	var scratch []int
	var out []int32
	buf := make([]byte, 0, 8)
	V, need := vocab.Size(), vocab.Size()
	var drawn []float32 // the logits that can be drawn: the tokens', then the pad id's
	if vocab.Pad != textdata.NoPad {
		need = int(vocab.Pad) + 1
		drawn = make([]float32, V+1)
	}
	start, prev := max(0, len(ids)-T), 0 // the window is ids[start:]; prev ids of it were read last call
	for range n {
		keep := prev
		if len(ids)-start > T { // full: jump ahead by half (see contextJump)
			start, keep = len(ids)-contextJump(T), 0
		}
		ctx := ids[start:]
		logits := m.NextLogits(ctx, keep)
		if len(logits) < need {
			return out, fmt.Errorf("the model gave %d logits for a vocabulary of %d ids", len(logits), need)
		}
		// ids past the vocabulary (a model wider than its text's
		// vocabulary) were never a target: they are not drawn, but for
		// the pad id, which was the target after a document's end.
		if drawn != nil {
			copy(drawn, logits[:V])
			drawn[V] = logits[vocab.Pad]
			logits = drawn
		} else {
			logits = logits[:V]
		}
		prev = len(ctx)
		id := s.pick(logits, rng, &scratch)
		if drawn != nil && id == int32(V) {
			return append(out, vocab.Pad), nil // the end of the document
		}
		ids = append(ids, id)
		out = append(out, id)
		buf = vocab.Token(buf[:0], id)
		if _, err := w.Write(buf); err != nil {
			return out, err
		}
	}
	return out, nil
}

// generateCmd is the generate command (Text's generate).
func generateCmd(m Model, args []string, stdout, stderr io.Writer) error {
	meta := m.Meta()
	flags := newFlags(meta, "generate")
	weights := flags.String("weights", "", weightsUsage(meta))
	prompt := flags.String("prompt", "", "the `TEXT` to continue")
	tokens := flags.Int("tokens", 200, "write `N` tokens after the prompt")
	temperature := flags.Float64("temperature", 0.8, "divide the logits by `T` before the softmax; 0 takes the most likely token")
	topK := flags.Int("top-k", 200, "draw from the `K` most likely tokens; 0 draws from all")
	seed := flags.Uint64("seed", 1, "the random seed `N` of the draws")
	threads := flags.Int("threads", 0, "use `N` CPU threads (0: all)")
	precision := flags.String("precision", "", "multiply the dense layers in `P`: f32, or bf16 (the weights rounded to bfloat16 once, half the bytes a token; the text can differ from f32's); default the spec's precision")
	_, cached := m.(TokenModel)
	kvUsage := "keep each position's keys and values, so a token costs one position's work; false runs the whole forward pass a token"
	if !cached {
		kvUsage = "(this model has no KV cache: its program did not recognise the model's attention, see the comment in its main.go; every token runs the whole forward pass)"
	}
	kvCache := flags.Bool("kv-cache", cached, kvUsage)
	if err := noOperands(flags, args, stdout); err != nil {
		return err
	}
	if err := weightsRequired(meta, *weights, "generate needs --weights FILE (the output of train)"); err != nil {
		return err
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	cpu.SetThreads(*threads)
	if os.Getenv(DecodePoolEnv) == "1" {
		cpu.UseDecodeTeam(false)
	}
	if kb, err := strconv.Atoi(os.Getenv(DecodePartEnv)); err == nil {
		cpu.SetDecodePartBytes(kb << 10)
	}
	switch {
	case *tokens < 0:
		return usageError{fmt.Sprintf("--tokens %d: want 0 or more", *tokens)}
	case !(*temperature >= 0) || math.IsInf(*temperature, 0):
		return usageError{fmt.Sprintf("--temperature %v: want 0 (greedy) or more", *temperature)}
	case *topK < 0:
		return usageError{fmt.Sprintf("--top-k %d: want 0 (all) or more", *topK)}
	}
	tm, ok := m.(TokenModel)
	if !*kvCache {
		ok = false
	}
	if !ok {
		o := meta.OutputShape
		if len(o) != 2 || o[0] != meta.inputSize() {
			return fmt.Errorf("generate needs a language model, whose output is [context, vocabulary]; this model's output is %s", joinShape(meta.outputShape()))
		}
		tm = &causalWindow{m: m, T: o[0], V: o[1]}
	}
	bf16, err := decodePrecision(tm, *precision)
	if err != nil {
		return err
	}
	if err := loadWeights(m, *weights); err != nil {
		return err
	}
	if bd, ok := tm.(BF16Decoder); ok {
		bd.DecodeBF16(bf16) // after the weights: it rounds them
	}
	vocab, err := recordVocab(meta.rec)
	if err != nil {
		return err
	}
	if n := meta.vocabCapacity(); vocab.Size() > n {
		return fmt.Errorf("the weights' vocabulary has %d tokens, but the model has %d ids", vocab.Size(), n)
	}
	if n := meta.vocabCapacity(); int(vocab.Pad) >= n {
		return fmt.Errorf("the weights' vocabulary pads documents with id %d, but the model has %d ids", vocab.Pad, n)
	}
	if meta.Padded && meta.PadID < vocab.Size() {
		// the decode plan drops the mask (planner.Decode.Padded): sound
		// only while no id it reads is the padding id
		return fmt.Errorf("the model's attention masks id %d as padding, but that id is the token %s of its vocabulary, which prompts and generated text hold unmasked; give padding an id of its own (a text dataset of documents pads with classes−1: pad: _vocab - 1)",
			meta.PadID, strconv.QuoteToGraphic(vocab.Decode([]int32{int32(meta.PadID)})))
	}
	var timed *timedModel
	if os.Getenv(DecodeStatsEnv) == "1" {
		timed = &timedModel{TokenModel: tm}
		tm = timed
		cpu.SetDecodeStats(true)
	}
	if _, err := generate(stdout, tm, vocab, *prompt, *tokens, Sampling{Temperature: *temperature, TopK: *topK}, *seed); err != nil {
		return err
	}
	if _, err = io.WriteString(stdout, "\n"); err != nil {
		return err
	}
	if timed != nil {
		writeDecodeStats(stderr, timed, cpu.ReadDecodeStats())
	}
	return nil
}

// causalWindow is the TokenModel of a Model without a cache: it runs the
// batch-1 inference plan on the context, placed at positions 0 to
// len(ctx)−1 with id 0 after it, and returns the logits of position
// len(ctx)−1. That holds for a causal model (a position's logits depend
// on the ids up to it, as a GPT's masked attention makes them), whatever
// fills the positions after it. It ignores keep: each token costs a
// whole forward pass over T positions, where a KV cache would compute one.
type causalWindow struct {
	m    Model
	T, V int
}

func (c *causalWindow) Context() int { return c.T }

func (c *causalWindow) NextLogits(ctx []int32, _ int) []float32 {
	in := c.m.InferInput(true)
	clear(in)
	for i, id := range ctx {
		in[i] = float32(id)
	}
	out := c.m.Infer(true)
	p := len(ctx) - 1
	return out[p*c.V : (p+1)*c.V]
}

// KVCacheCheck is the selftest row of a model with a KV cache (a
// TokenModel): from weights drawn with a fixed seed, it feeds T+2 seeded
// random ids (never a padding id) one at a time, as generate does (the window slides twice at
// the end, and keep is 0 then), and compares the logits of NextLogits at
// several lengths with those of the batch-1 forward pass over the same
// window.
func KVCacheCheck(m Model, tm TokenModel) SelfTestRow {
	return kvCacheCheck(m, tm, SelfTestRow{Name: "KV cache against the full forward pass", Tol: 1e-4}, nil)
}

// KVCacheBF16Check is KVCacheCheck with the decode multiplying in bf16
// (generate --precision bf16) against the float32 forward pass: the
// logits' largest difference, within what rounding the weights and each
// row to bfloat16 moves them. The tolerance, 3e-2, is about five times
// the largest difference measured on this check's weights: 6.5e-3 for
// models/gpt.cue's program, 2.2e-3 for the small GPT's.
// Logits that differ by less than 1e-5 fail too: the decode did not
// multiply in bf16.
func KVCacheBF16Check(m Model, bd BF16Decoder) SelfTestRow {
	row := kvCacheCheck(m, bd, SelfTestRow{Name: "KV cache in bf16 against the f32 forward pass", Tol: 3e-2}, bd)
	if row.Err == nil && row.MaxError < 1e-5 {
		row.Err = fmt.Errorf("the logits differ from f32's by %.3g at most: the decode did not multiply in bf16", row.MaxError)
	}
	return row
}

// kvCacheCheck is the two checks' comparison; bd, when not nil, decodes in
// bf16 from the check's weights on.
func kvCacheCheck(m Model, tm TokenModel, row SelfTestRow, bd BF16Decoder) SelfTestRow {
	meta := m.Meta()
	V, T := meta.Vocab, tm.Context()
	if V <= 0 {
		V = meta.vocabCapacity()
	}
	initParams(m, 3)
	if bd != nil {
		bd.DecodeBF16(true) // rounds the weights just drawn
		defer bd.DecodeBF16(false)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var ids []int32
	prev := 0
	full := &causalWindow{m: m, T: T, V: meta.vocabCapacity()}
	for n := 1; n <= T+2; n++ {
		ids = append(ids, checkID(meta, V, rng))
		ctx, keep := ids, prev
		if len(ids) > T {
			ctx, keep = ids[len(ids)-T:], 0
		}
		got := append([]float32(nil), tm.NextLogits(ctx, keep)...)
		prev = len(ctx)
		if n > 3 && n < T-1 && n != T/2 {
			continue // the full pass is T positions' work: compare at a few lengths
		}
		want := full.NextLogits(ctx, 0)
		if len(got) < len(want) {
			row.Err = fmt.Errorf("%d logits from the cache, %d from the full pass", len(got), len(want))
			return row
		}
		for i, w := range want {
			d := math.Abs(float64(got[i] - w))
			if math.IsNaN(d) {
				d = math.Inf(1) // a NaN stays a failure
			}
			row.MaxError = max(row.MaxError, d)
		}
	}
	return row
}

// checkID draws an id of a vocabulary of V for the KV cache's checks as
// generate feeds ids: never the padding id of a model with padding masks,
// which its decode plan does not mask (planner.Decode.Padded).
func checkID(meta *Meta, V int, rng *rand.Rand) int32 {
	if !meta.Padded || meta.PadID < 0 || meta.PadID >= V {
		return int32(rng.IntN(V))
	}
	id := int32(rng.IntN(V - 1))
	if id >= int32(meta.PadID) {
		id++
	}
	return id
}

func quoteShort(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q… (%d bytes)", s[:40], len(s))
	}
	return fmt.Sprintf("%q", s)
}
