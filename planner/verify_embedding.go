package planner

import "fmt"

// The shape rules of embeddings (checkShapes in verify.go dispatches to
// them).

// embedding checks ids [B,T], the table [V,D], the position table [T,D]
// and y [B,T,D], and the backward's gradients shaped like its tables.
func (r shapeRules) embedding(s *Step) error {
	ids := r.sh(s.In[0])
	if len(ids) != 2 {
		return fmt.Errorf("ids %s are not [B,T]", shapeString(ids))
	}
	if err := r.kindIs(s.In[0], KindInput); err != nil {
		return err
	}
	if s.Kernel == KEmbeddingBwd {
		dy := r.sh(s.In[1])
		if len(dy) != 3 || dy[0] != ids[0] || dy[1] != ids[1] {
			return fmt.Errorf("dy %s is not [%d,%d,D]", shapeString(dy), ids[0], ids[1])
		}
		if w := r.sh(s.Out[0]); w != nil && (len(w) != 2 || w[1] != dy[2]) {
			return fmt.Errorf("dweight %s is not [V,%d]", shapeString(w), dy[2])
		}
		return first(r.is("dpos", s.Out[1], []int{ids[1], dy[2]}), r.kindIs(s.Out[0], KindParamGrad, KindGrad), r.kindIs(s.Out[1], KindParamGrad))
	}
	w := r.sh(s.In[1])
	if len(w) != 2 {
		return fmt.Errorf("weight %s is not [V,D]", shapeString(w))
	}
	return first(r.is("pos", s.In[2], []int{ids[1], w[1]}), r.is("y", s.Out[0], []int{ids[0], ids[1], w[1]}),
		r.kindIs(s.In[1], KindParam), r.kindIs(s.In[2], KindParam))
}
