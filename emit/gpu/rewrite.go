package gpu

// Rewrite returns a copy of k in which every math function that d cannot
// spell is expanded into functions it can. This is where a language's
// missing features are handled, so the printer stays a table lookup.
func Rewrite(k *Kernel, d *Dialect) *Kernel {
	out := *k
	body := k.Body
	if f32, bf16 := d.Load4 == "" || d.Store4 == "", d.Load4BF16 == "" || d.Store4BF16 == ""; f32 || bf16 {
		body = splitVec4(body, f32, bf16)
	}
	out.Body = rewriteStmts(body, func(e Expr) Expr {
		if c, ok := e.(Call); ok {
			if _, has := d.Funcs[c.Fn]; !has && c.Fn == FnErf {
				return erfPoly(c.Args[0])
			}
		}
		return e
	})
	return &out
}

// erfPoly is Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
// erf(x) = sign(x)·(1 − t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·exp(−x²)),
// t = 1/(1 + p·|x|).
func erfPoly(x Expr) Expr {
	ax := call(FnAbs, x)
	t := div(flt(1), add(flt(1), mul(flt(0.3275911), ax)))
	poly := flt(1.061405429)
	for _, a := range []float32{-1.453152027, 1.421413741, -0.284496736, 0.254829592} {
		poly = add(flt(a), mul(t, poly))
	}
	r := sub(flt(1), mul(mul(t, poly), call(FnExp, neg(mul(ax, ax)))))
	return sel(lt(x, flt(0)), neg(r), r)
}

// splitVec4 replaces every Load4 and Store4 in ss by four scalar loads or
// stores where f32, and every Load4BF16 and Store4BF16 by four scalar
// bfloat16 ones where bf16, for a dialect without such accesses.
func splitVec4(ss []Stmt, f32, bf16 bool) []Stmt {
	var out []Stmt
	for _, s := range ss {
		switch s := s.(type) {
		case Load4:
			if !f32 {
				out = append(out, s)
				continue
			}
			for i, n := range s.Names {
				out = append(out, let(n, Float, load(s.Buf, add(s.Index, i32(i)))))
			}
		case Store4:
			if !f32 {
				out = append(out, s)
				continue
			}
			for i, v := range s.Values {
				out = append(out, store(s.Buf, add(s.Index, i32(i)), v))
			}
		case Load4BF16:
			if !bf16 {
				out = append(out, s)
				continue
			}
			for i, n := range s.Names {
				out = append(out, let(n, Float, LoadBF16{s.Buf, add(s.Index, i32(i))}))
			}
		case Store4BF16:
			if !bf16 {
				out = append(out, s)
				continue
			}
			for i, v := range s.Values {
				out = append(out, storeBF16(s.Buf, add(s.Index, i32(i)), v))
			}
		case If:
			s.Then, s.Else = splitVec4(s.Then, f32, bf16), splitVec4(s.Else, f32, bf16)
			out = append(out, s)
		case For:
			s.Body = splitVec4(s.Body, f32, bf16)
			out = append(out, s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// rewriteStmts applies f bottom-up to every expression in ss.
func rewriteStmts(ss []Stmt, f func(Expr) Expr) []Stmt {
	out := make([]Stmt, len(ss))
	for i, s := range ss {
		switch s := s.(type) {
		case Let:
			s.Init = rewriteExpr(s.Init, f)
			out[i] = s
		case Assign:
			s.Value = rewriteExpr(s.Value, f)
			out[i] = s
		case Store:
			s.Index, s.Value = rewriteExpr(s.Index, f), rewriteExpr(s.Value, f)
			out[i] = s
		case StoreBF16:
			s.Index, s.Value = rewriteExpr(s.Index, f), rewriteExpr(s.Value, f)
			out[i] = s
		case Load4:
			s.Index = rewriteExpr(s.Index, f)
			out[i] = s
		case FragSet:
			s.Value = rewriteExpr(s.Value, f)
			out[i] = s
		case Store4:
			s.Index = rewriteExpr(s.Index, f)
			for j := range s.Values {
				s.Values[j] = rewriteExpr(s.Values[j], f)
			}
			out[i] = s
		case Load4BF16:
			s.Index = rewriteExpr(s.Index, f)
			out[i] = s
		case Store4BF16:
			s.Index = rewriteExpr(s.Index, f)
			for j := range s.Values {
				s.Values[j] = rewriteExpr(s.Values[j], f)
			}
			out[i] = s
		case If:
			s.Cond = rewriteExpr(s.Cond, f)
			s.Then, s.Else = rewriteStmts(s.Then, f), rewriteStmts(s.Else, f)
			out[i] = s
		case For:
			s.From, s.To, s.Step = rewriteExpr(s.From, f), rewriteExpr(s.To, f), rewriteExpr(s.Step, f)
			s.Body = rewriteStmts(s.Body, f)
			out[i] = s
		default:
			out[i] = s
		}
	}
	return out
}

func rewriteExpr(e Expr, f func(Expr) Expr) Expr {
	switch x := e.(type) {
	case Binary:
		x.L, x.R = rewriteExpr(x.L, f), rewriteExpr(x.R, f)
		e = x
	case Unary:
		x.X = rewriteExpr(x.X, f)
		e = x
	case Select:
		x.Cond, x.Then, x.Else = rewriteExpr(x.Cond, f), rewriteExpr(x.Then, f), rewriteExpr(x.Else, f)
		e = x
	case Call:
		args := make([]Expr, len(x.Args))
		for i, a := range x.Args {
			args[i] = rewriteExpr(a, f)
		}
		x.Args = args
		e = x
	case Load:
		x.Index = rewriteExpr(x.Index, f)
		e = x
	case LoadBF16:
		x.Index = rewriteExpr(x.Index, f)
		e = x
	case Cast:
		x.X = rewriteExpr(x.X, f)
		e = x
	case PackBF16:
		x.Lo, x.Hi = rewriteExpr(x.Lo, f), rewriteExpr(x.Hi, f)
		e = x
	case ShuffleXor:
		x.X = rewriteExpr(x.X, f)
		e = x
	}
	return f(e)
}
