package mps

// DataTypeFloat32 is MPSDataTypeFloat32 (MPSDataTypeFloatBit | 32): every
// matrix mlbuild hands to MPS holds float32s.
const DataTypeFloat32 uint = 0x10000000 | 32

// MatrixDescriptor is an MPSMatrixDescriptor: the shape and stride of a
// matrix in a buffer.
type MatrixDescriptor struct {
	b  *bridge
	id ID
}

// MatrixDescriptorWithRows returns an autoreleased descriptor of a
// rows×columns float32 matrix whose rows are rowBytes apart.
// https://developer.apple.com/documentation/metalperformanceshaders/mpsmatrixdescriptor/2873331-matrixdescriptorwithrows?language=objc
func (d Device) MatrixDescriptorWithRows(rows, columns, rowBytes uint) MatrixDescriptor {
	id := ID(d.b.send(d.b.class(classMPSMatrixDescriptor), selMatrixDescriptorWithRows, rows, columns, rowBytes, DataTypeFloat32))
	return MatrixDescriptor{b: d.b, id: id}
}

// Matrix is an MPSMatrix: a view of part of a buffer as a matrix.
type Matrix struct {
	b  *bridge
	id ID
}

// NewMatrixWithBuffer makes a matrix over buf from byte offset on, shaped
// by desc. The caller owns it (+1).
// https://developer.apple.com/documentation/metalperformanceshaders/mpsmatrix/3229863-initwithbuffer?language=objc
func (d Device) NewMatrixWithBuffer(buf Buffer, offset uint, desc MatrixDescriptor) Matrix {
	obj := ID(d.b.send(d.b.class(classMPSMatrix), selAlloc))
	return Matrix{b: d.b, id: ID(d.b.send(obj, selInitWithBufferOffsetDesc, buf.id, offset, desc.id))}
}

// Release gives back the matrix's reference.
func (m Matrix) Release() { m.b.release(m.id) }

// MatrixMultiplication is an MPSMatrixMultiplication kernel:
// C = alpha·op(A)·op(B) + beta·C with op a transpose or not, fixed sizes.
type MatrixMultiplication struct {
	b  *bridge
	id ID
}

// NewMatrixMultiplication makes a GEMM kernel for resultRows×resultColumns
// results with interiorColumns terms. Transposes come from the flags, never
// from copies. The caller owns it (+1).
// https://developer.apple.com/documentation/metalperformanceshaders/mpsmatrixmultiplication/2147845-initwithdevice?language=objc
func (d Device) NewMatrixMultiplication(transposeLeft, transposeRight bool, resultRows, resultColumns, interiorColumns uint, alpha, beta float64) MatrixMultiplication {
	obj := ID(d.b.send(d.b.class(classMPSMatrixMultiplication), selAlloc))
	id := ID(d.b.send(obj, selInitWithDeviceTranspose, d.id, transposeLeft, transposeRight, resultRows, resultColumns, interiorColumns, alpha, beta))
	return MatrixMultiplication{b: d.b, id: id}
}

// EncodeToCommandBuffer appends the GEMM to cb. No compute encoder may be
// open on cb: MPS opens its own.
// https://developer.apple.com/documentation/metalperformanceshaders/mpsmatrixmultiplication/2147848-encodetocommandbuffer?language=objc
func (k MatrixMultiplication) EncodeToCommandBuffer(cb CommandBuffer, left, right, result Matrix) {
	k.b.send(k.id, selEncodeToCommandBuffer, cb.id, left.id, right.id, result.id)
}

// Release gives back the kernel's reference.
func (k MatrixMultiplication) Release() { k.b.release(k.id) }
