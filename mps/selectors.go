package mps

// Every class and selector this package uses, registered once. The first
// argument of registerSel names the class or protocol that receives the
// message (objects such as id<MTLDevice> are private classes, so it is the
// protocol); apitable_test.go checks each pair against Apple's API tables in
// testdata/apple-api, walking superclasses and protocols.
var (
	classNSString                = registerClass("NSString")
	classNSAutoreleasePool       = registerClass("NSAutoreleasePool")
	classMPSMatrixDescriptor     = registerClass("MPSMatrixDescriptor")
	classMPSMatrix               = registerClass("MPSMatrix")
	classMPSMatrixMultiplication = registerClass("MPSMatrixMultiplication")
)

// NSObject: memory management and allocation, inherited by every object.
var (
	selAlloc   = registerClassSel("NSObject", "alloc")
	selRetain  = registerSel("NSObject", "retain")
	selRelease = registerSel("NSObject", "release")
)

// Foundation.
var (
	selNew                       = registerClassSel("NSAutoreleasePool", "new")
	selDrain                     = registerSel("NSAutoreleasePool", "drain")
	selInitWithBytesLengthEncode = registerSel("NSString", "initWithBytes:length:encoding:")
	selUTF8String                = registerSel("NSString", "UTF8String")
	selLocalizedDescription      = registerSel("NSError", "localizedDescription")
)

// Metal.
var (
	selName                                 = registerSel("MTLDevice", "name")
	selNewCommandQueue                      = registerSel("MTLDevice", "newCommandQueue")
	selNewBufferWithLengthOptions           = registerSel("MTLDevice", "newBufferWithLength:options:")
	selNewLibraryWithSourceOptionsError     = registerSel("MTLDevice", "newLibraryWithSource:options:error:")
	selNewComputePipelineStateWithFunction  = registerSel("MTLDevice", "newComputePipelineStateWithFunction:error:")
	selResourceSetLabel                     = registerSel("MTLResource", "setLabel:")
	selContents                             = registerSel("MTLBuffer", "contents")
	selLength                               = registerSel("MTLBuffer", "length")
	selNewFunctionWithName                  = registerSel("MTLLibrary", "newFunctionWithName:")
	selMaxTotalThreadsPerThreadgroup        = registerSel("MTLComputePipelineState", "maxTotalThreadsPerThreadgroup")
	selThreadExecutionWidth                 = registerSel("MTLComputePipelineState", "threadExecutionWidth")
	selCommandBuffer                        = registerSel("MTLCommandQueue", "commandBuffer")
	selComputeCommandEncoder                = registerSel("MTLCommandBuffer", "computeCommandEncoder")
	selCommit                               = registerSel("MTLCommandBuffer", "commit")
	selWaitUntilCompleted                   = registerSel("MTLCommandBuffer", "waitUntilCompleted")
	selStatus                               = registerSel("MTLCommandBuffer", "status")
	selError                                = registerSel("MTLCommandBuffer", "error")
	selCommandBufferSetLabel                = registerSel("MTLCommandBuffer", "setLabel:")
	selSetComputePipelineState              = registerSel("MTLComputeCommandEncoder", "setComputePipelineState:")
	selSetBufferOffsetAtIndex               = registerSel("MTLComputeCommandEncoder", "setBuffer:offset:atIndex:")
	selSetBytesLengthAtIndex                = registerSel("MTLComputeCommandEncoder", "setBytes:length:atIndex:")
	selDispatchThreadsThreadsPerThreadgroup = registerSel("MTLComputeCommandEncoder", "dispatchThreads:threadsPerThreadgroup:")
	selDispatchThreadgroupsThreadsPerGroup  = registerSel("MTLComputeCommandEncoder", "dispatchThreadgroups:threadsPerThreadgroup:")
	selEndEncoding                          = registerSel("MTLComputeCommandEncoder", "endEncoding")
)

// MetalPerformanceShaders.
var (
	selMatrixDescriptorWithRows = registerClassSel("MPSMatrixDescriptor", "matrixDescriptorWithRows:columns:rowBytes:dataType:")
	selInitWithBufferOffsetDesc = registerSel("MPSMatrix", "initWithBuffer:offset:descriptor:")
	selInitWithDeviceTranspose  = registerSel("MPSMatrixMultiplication", "initWithDevice:transposeLeft:transposeRight:resultRows:resultColumns:interiorColumns:alpha:beta:")
	selEncodeToCommandBuffer    = registerSel("MPSMatrixMultiplication", "encodeToCommandBuffer:leftMatrix:rightMatrix:resultMatrix:")
)
