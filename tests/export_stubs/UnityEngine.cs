// A stub of the UnityEngine types Ember's Unity glue uses (python/ember/export/unity.py), with
// Unity's signatures and no behaviour: the tests compile the generated C# against it with Debian's
// `mcs`. That is a syntax and type check of the generated code, not a run in Unity.
using System;

namespace UnityEngine
{
    public class Object { public string name; }
    public class Component : Object { }
    public class Behaviour : Component { public bool enabled; }
    public class MonoBehaviour : Behaviour { }

    public enum ComputeBufferType { Default = 0, Raw = 1, Append = 2, Counter = 4, Constant = 8, Structured = 16 }

    public class ComputeBuffer : IDisposable
    {
        public ComputeBuffer(int count, int stride) { this.count = count; this.stride = stride; }
        public ComputeBuffer(int count, int stride, ComputeBufferType type) : this(count, stride) { }
        public int count { get; private set; }
        public int stride { get; private set; }
        public bool IsValid() { return true; }
        public void SetData(Array data) { }
        public void SetData(Array data, int managedBufferStartIndex, int computeBufferStartIndex, int count) { }
        public void GetData(Array data) { }
        public void GetData(Array data, int managedBufferStartIndex, int computeBufferStartIndex, int count) { }
        public void Release() { }
        public void Dispose() { }
    }

    public class ComputeShader : Object
    {
        public int FindKernel(string name) { return 0; }
        public bool HasKernel(string name) { return true; }
        public void SetBuffer(int kernelIndex, string name, ComputeBuffer buffer) { }
        public void SetInt(string name, int val) { }
        public void SetFloat(string name, float val) { }
        public void SetBool(string name, bool val) { }
        public void Dispatch(int kernelIndex, int threadGroupsX, int threadGroupsY, int threadGroupsZ) { }
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
