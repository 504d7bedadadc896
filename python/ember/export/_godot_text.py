"""Fixed text of the Godot glue (godot.py): the methods every generated GDScript class has."""


# The fixed methods of every generated GDScript class: the public set_data/get_data/copy/release and
# the helpers run() calls.
_GD_HELPERS = """## Uploads `data` (4 bytes per element) into buffer `name`.
func set_data(name: String, data: PackedByteArray) -> void:
	rd.buffer_update(buffers[name], 0, data.size(), data)

## The contents of buffer `name` (waits for the device).
func get_data(name: String) -> PackedByteArray:
	if local:
		rd.submit()
		rd.sync()
	return rd.buffer_get_data(buffers[name])

## Copies all of buffer `src` into `dst` on the device (e.g. an output back into its input).
func copy(src: String, dst: String) -> void:
	_copy(src, 0, dst, 0, mini(counts[src], counts[dst]))

## Frees every buffer, uniform set, pipeline and shader.
func release() -> void:
	for d in [_sets, _pipelines, _shaders, _param_buffers, buffers]:
		for key in d:
			rd.free_rid(d[key])
		d.clear()

func _buffer(name: String, count: int) -> void:
	counts[name] = count
	buffers[name] = rd.storage_buffer_create(maxi(count, 1) * 4)

func _load(file: String) -> void:
	var source: RDShaderFile = load(SHADER_DIR + file)
	var shader := rd.shader_create_from_spirv(source.get_spirv())
	_shaders[file] = shader
	_pipelines[file] = rd.compute_pipeline_create(shader)

func _kernel(kernel: String, file: String, bindings: Dictionary, params_binding: int, params_size: int) -> void:
	var uniforms: Array[RDUniform] = []
	for binding in bindings:
		uniforms.append(_storage_uniform(binding, buffers[bindings[binding]]))
	if params_binding >= 0:
		_param_buffers[kernel] = rd.storage_buffer_create(params_size)
		uniforms.append(_storage_uniform(params_binding, _param_buffers[kernel]))
	_sets[kernel] = rd.uniform_set_create(uniforms, _shaders[file], 0)

func _storage_uniform(binding: int, buffer: RID) -> RDUniform:
	var u := RDUniform.new()
	u.uniform_type = RenderingDevice.UNIFORM_TYPE_STORAGE_BUFFER
	u.binding = binding
	u.add_id(buffer)
	return u

## The parameter block: `size` bytes, each word [offset, is_float, value].
func _params(size: int, words: Array) -> PackedByteArray:
	var bytes := PackedByteArray()
	bytes.resize(size)
	for word in words:
		if word[1]:
			bytes.encode_float(word[0], word[2])
		else:
			bytes.encode_u32(word[0], int(word[2]) & 0xFFFFFFFF)
	return bytes

func _dispatch(kernel: String, file: String, gx: int, gy: int, gz: int, params: PackedByteArray) -> void:
	if gx <= 0 or gy <= 0 or gz <= 0:
		return
	if _param_buffers.has(kernel):
		rd.buffer_update(_param_buffers[kernel], 0, params.size(), params)
	var list := rd.compute_list_begin()
	rd.compute_list_bind_compute_pipeline(list, _pipelines[file])
	rd.compute_list_bind_uniform_set(list, _sets[kernel], 0)
	if not _param_buffers.has(kernel) and params.size() > 0:
		rd.compute_list_set_push_constant(list, params, params.size())
	rd.compute_list_dispatch(list, gx, gy, gz)
	rd.compute_list_end()

func _copy(src: String, src_offset: int, dst: String, dst_offset: int, count: int) -> void:
	if count > 0:
		rd.buffer_copy(buffers[src], buffers[dst], src_offset * 4, dst_offset * 4, count * 4)

func _fill(name: String, offset: int, count: int, word: int) -> void:
	if count <= 0:
		return
	if word == 0:
		rd.buffer_clear(buffers[name], offset * 4, count * 4)
		return
	var words := PackedInt32Array()
	words.resize(count)
	words.fill(_wrap_i32(word))
	rd.buffer_update(buffers[name], offset * 4, count * 4, words.to_byte_array())

func _read_word(name: String, index: int) -> PackedByteArray:
	if local:
		rd.submit()
		rd.sync()
	return rd.buffer_get_data(buffers[name], index * 4, 4)

static func _f32_bits(v: float) -> int:
	var bytes := PackedByteArray()
	bytes.resize(4)
	bytes.encode_float(0, v)
	return bytes.decode_u32(0)

static func _wrap_i32(v: int) -> int:
	v = v & 0xFFFFFFFF
	return v - 0x100000000 if v >= 0x80000000 else v

## Plan arithmetic (docs/export.md): / and % truncate as in C, the floor variants round down; a
## zero divisor gives 0.
static func _div(a: int, b: int) -> int:
	return 0 if b == 0 else a / b

static func _mod(a: int, b: int) -> int:
	return 0 if b == 0 else a % b

static func _floordiv(a: int, b: int) -> int:
	if b == 0:
		return 0
	var q := a / b
	return q - 1 if (a % b != 0 and ((a % b < 0) != (b < 0))) else q

static func _floormod(a: int, b: int) -> int:
	return 0 if b == 0 else a - _floordiv(a, b) * b
"""
