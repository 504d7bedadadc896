// A stub of the UnityEngine types Ember's Unity glue uses (python/ember/export/unity.py), with
// Unity's signatures: the tests compile the generated C# against it with Debian's `mcs`. That is a
// syntax and type check of the generated code, not a run in Unity. The stub also records what the
// host code asks of the GPU (EmberStub.Log: dispatches with their groups and parameter words, the
// ember_copy / ember_fill helper dispatches as copies and fills, readbacks), so a test can run the
// generated C# with `mono` and compare its host plan with tools/export_runner's --trace. Members
// named EmberStub* are the stub's own, not Unity's: generated code never uses them.
using System;
using System.Collections.Generic;
using System.Text;

namespace UnityEngine
{
    public class Object { public string name; }
    public class Component : Object { }
    public class Behaviour : Component { public bool enabled; }
    public class MonoBehaviour : Behaviour { }

    public enum ComputeBufferType { Default = 0, Raw = 1, Append = 2, Counter = 4, Constant = 8, Structured = 16 }

    /// <summary>The stub's recording (not Unity API).</summary>
    public static class EmberStub
    {
        public static readonly StringBuilder Log = new StringBuilder();
        /// <summary>Words GetData returns, in order (the runner's readback values); zeros after.</summary>
        public static readonly Queue<uint> Readbacks = new Queue<uint>();

        /// <summary>Names every public ComputeBuffer field of `obj` after the field, for the log.</summary>
        public static void NameBuffers(object obj)
        {
            foreach (var f in obj.GetType().GetFields())
                if (f.FieldType == typeof(ComputeBuffer)) ((ComputeBuffer)f.GetValue(obj)).EmberStubName = f.Name;
        }
    }

    public class ComputeBuffer : IDisposable
    {
        public string EmberStubName = "?";
        public ComputeBuffer(int count, int stride) { this.count = count; this.stride = stride; }
        public ComputeBuffer(int count, int stride, ComputeBufferType type) : this(count, stride) { }
        public int count { get; private set; }
        public int stride { get; private set; }
        public bool IsValid() { return true; }
        public void SetData(Array data) { }
        public void SetData(Array data, int managedBufferStartIndex, int computeBufferStartIndex, int count) { }
        public void GetData(Array data) { }
        public void GetData(Array data, int managedBufferStartIndex, int computeBufferStartIndex, int count)
        {
            for (int i = 0; i < count; i++)
            {
                uint w = EmberStub.Readbacks.Count > 0 ? EmberStub.Readbacks.Dequeue() : 0u;
                EmberStub.Log.AppendFormat("readback {0} {1} = 0x{2:X8}\n", EmberStubName, computeBufferStartIndex + i, w);
                data.SetValue(w, managedBufferStartIndex + i);
            }
        }
        public void Release() { }
        public void Dispose() { }
    }

    public class ComputeShader : Object
    {
        readonly List<string> kernels = new List<string>();
        readonly SortedDictionary<string, uint> words = new SortedDictionary<string, uint>(StringComparer.Ordinal);
        readonly Dictionary<string, ComputeBuffer> buffers = new Dictionary<string, ComputeBuffer>();

        public int FindKernel(string name)
        {
            if (!kernels.Contains(name)) kernels.Add(name);
            return kernels.IndexOf(name);
        }
        public bool HasKernel(string name) { return true; }
        public void SetBuffer(int kernelIndex, string name, ComputeBuffer buffer) { buffers[kernelIndex + ":" + name] = buffer; }
        public void SetInt(string name, int val) { words[name] = unchecked((uint)val); }
        public void SetFloat(string name, float val) { words[name] = BitConverter.ToUInt32(BitConverter.GetBytes(val), 0); }
        public void SetBool(string name, bool val) { words[name] = val ? 1u : 0u; }
        public void Dispatch(int kernelIndex, int threadGroupsX, int threadGroupsY, int threadGroupsZ)
        {
            string k = kernels[kernelIndex];
            StringBuilder log = EmberStub.Log;
            if (k == "ember_copy")
                log.AppendFormat("copy {0} {1} {2} {3} {4}\n", buffers[kernelIndex + ":ember_src"].EmberStubName,
                                 buffers[kernelIndex + ":ember_dst"].EmberStubName, words["ember_src_offset"],
                                 words["ember_dst_offset"], words["ember_count"]);
            else if (k == "ember_fill")
                log.AppendFormat("fill {0} {1} {2} 0x{3:X8}\n", buffers[kernelIndex + ":ember_dst"].EmberStubName,
                                 words["ember_dst_offset"], words["ember_count"], words["ember_value"]);
            else
            {
                log.AppendFormat("dispatch {0} {1} {2} {3}", k, threadGroupsX, threadGroupsY, threadGroupsZ);
                foreach (var kv in words) log.AppendFormat(" {0}=0x{1:X8}", kv.Key, kv.Value);
                log.Append("\n");
            }
        }
    }

    public class Shader : Object
    {
        public static Shader Find(string name) { return null; }
    }

    public class Material : Object
    {
        public Material(Shader shader) { }
        public void SetBuffer(string name, ComputeBuffer value) { }
        public void SetInt(string name, int value) { }
        public void SetFloat(string name, float value) { }
    }

    public struct Vector3
    {
        public float x, y, z;
        public Vector3(float x, float y, float z) { this.x = x; this.y = y; this.z = z; }
        public static Vector3 zero { get { return new Vector3(0, 0, 0); } }
        public static Vector3 one { get { return new Vector3(1, 1, 1); } }
        public static Vector3 operator *(Vector3 a, float d) { return new Vector3(a.x * d, a.y * d, a.z * d); }
    }

    public struct Bounds
    {
        public Bounds(Vector3 center, Vector3 size) { this.center = center; this.size = size; }
        public Vector3 center, size;
    }

    public enum MeshTopology { Triangles = 0, Quads = 2, Lines = 3, LineStrip = 4, Points = 5 }

    public static class Graphics
    {
        public static void DrawProcedural(Material material, Bounds bounds, MeshTopology topology, int vertexCount) { }
    }

    public static class Debug
    {
        public static void Log(object message) { }
        public static void LogError(object message) { }
    }

    [AttributeUsage(AttributeTargets.Field)]
    public class TooltipAttribute : Attribute { public TooltipAttribute(string tooltip) { } }

    [AttributeUsage(AttributeTargets.Field)]
    public class SerializeField : Attribute { }
}
