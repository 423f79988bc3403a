fn main() {
    use numapilot_observe::*;
    println!("Vma {} MemPolicy {} ThreadSample {} TaskStat {} TaskStatus {} SchedInfo {} ProcessSample {}", std::mem::size_of::<Vma>(), std::mem::size_of::<MemPolicy>(), std::mem::size_of::<ThreadSample>(), std::mem::size_of::<TaskStat>(), std::mem::size_of::<TaskStatus>(), std::mem::size_of::<SchedInfo>(), std::mem::size_of::<ProcessSample>());
}
